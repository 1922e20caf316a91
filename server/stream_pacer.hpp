// When a stream's events go to the socket: each at once, or a fast stream's events gathered
// into fewer writes for at most a bounded time.
#pragma once

#include <chrono>
#include <cstddef>

namespace conveyor::server {

/// Decides, event by event, whether a stream's events are written now or wait to go out with
/// the following ones. An event waits only while all of these hold:
/// - it does not open one of the stream's choices (a choice's first events, its time to first
///   token, never wait);
/// - fewer than `max_events` events wait, this one included;
/// - the stream is fast: this event came less than half of `max_delay` after the one before
///   (a slower stream would gain little from gathering and only be delayed);
/// - the oldest waiting event came less than `max_delay` ago.
/// The caller writes everything waiting when told `write`, and when `deadline()` passes
/// while events wait (its timer) it calls `release`. So no event waits longer than
/// `max_delay`. `max_events <= 1` or a zero `max_delay` writes every event at once. The
/// stream's end is written at once by the caller, with whatever waits.
class stream_pacer {
 public:
  using clock = std::chrono::steady_clock;

  /// What to do with the events waiting after an arrival.
  enum class verdict {
    /// Write everything that waits now.
    write,
    /// Keep them; they are due at `deadline()` at the latest.
    hold,
  };

  stream_pacer(std::size_t max_events, clock::duration max_delay);

  /// `events` (at least one) arrived at `now`; `opens`: they are the first of their choice.
  verdict on_events(std::size_t events, bool opens, clock::time_point now);

  /// Events wait.
  bool holding() const { return waiting_ > 0; }

  /// When the waiting events are due (the oldest one's arrival plus `max_delay`); only
  /// meaningful while `holding()`.
  clock::time_point deadline() const { return oldest_ + max_delay_; }

  /// The waiting events were written (the deadline passed, or the stream ended).
  void release() { waiting_ = 0; }

  /// Whether any event can ever wait with these settings (else the writer need not hold).
  bool can_hold() const { return max_events_ > 1 && max_delay_ > clock::duration::zero(); }

 private:
  std::size_t max_events_;
  clock::duration max_delay_;
  std::size_t waiting_ = 0;
  clock::time_point last_arrival_{};
  clock::time_point oldest_{};
};

}  // namespace conveyor::server
