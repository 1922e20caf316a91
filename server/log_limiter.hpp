// Internal: rate-limiting one kind of repeated log line (refusing connections), so that a burst
// writes one line with a count instead of thousands. A plain class; the caller passes the time.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace conveyor::server::detail {

/// Lets one kind of log line through at most once per interval and counts the ones held back.
/// Not thread-safe: the server uses it on its control strand.
class log_limiter {
 public:
  using clock = std::chrono::steady_clock;

  /// A line to write: how many occurrences it stands for, over how long.
  struct line {
    /// Occurrences, this one included (1 for a lone one).
    uint64_t count = 1;
    /// Time since the last line written (zero for the first line).
    clock::duration span{};
  };

  /// At most one line per `interval`.
  explicit log_limiter(clock::duration interval) : interval_(interval) {}

  /// One occurrence at `now`: the line to write now, or nullopt when it is held back (counted
  /// into the next line).
  std::optional<line> note(clock::time_point now);

  /// The line for the occurrences held back, once `interval` has passed since the last line
  /// (a timer calls it so that the end of a burst is reported); else nullopt.
  std::optional<line> flush(clock::time_point now);

  /// Occurrences held back and not written yet.
  uint64_t held_back() const { return held_; }

 private:
  clock::duration interval_;
  std::optional<clock::time_point> last_line_;
  uint64_t held_ = 0;
};

}  // namespace conveyor::server::detail
