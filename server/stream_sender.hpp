// Internal: one connection's event streams on their way to its response writer: the stream's
// head, when the events that a task rendered into the writer's stream buffer go out (the
// stream_pacer and its timer), how much of the stream waits unsent, and the stream's end. Runs
// on the connection's strand.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "server/response_writer.hpp"
#include "server/stream_pacer.hpp"

namespace conveyor::server::detail {

/// Sends one connection's event streams, one response at a time, through its response writer.
/// A fast stream's events may wait to go out together (`stream_pacer`'s rule); a timer writes
/// them at their deadline. Only the connection's strand calls it.
class stream_sender {
 public:
  using clock = std::chrono::steady_clock;

  /// Starts the next write of what is due (the connection's flush, which does nothing once the
  /// connection closed).
  using flush_handler = std::function<void()>;

  /// A reference to the owner (the connection), held while the timer waits.
  using owner_handler = std::function<std::shared_ptr<void>()>;

  /// Streams through `writer`, with its timer on `strand`: at most `max_events` events wait to
  /// go out together, for at most `max_delay` (`server.stream_interval`,
  /// `server.stream_delay_ms`); a client that leaves more than `max_unsent_bytes` unsent is too
  /// slow (`server.max_stream_buffer_bytes`). `flush` writes; `owner` keeps the owner alive
  /// while the timer waits.
  stream_sender(response_writer& writer, const boost::asio::any_io_executor& strand,
                std::size_t max_events, clock::duration max_delay, std::size_t max_unsent_bytes,
                flush_handler flush, owner_handler owner);

  stream_sender(const stream_sender&) = delete;
  stream_sender& operator=(const stream_sender&) = delete;

  /// Where the stream's events are rendered ("data: <payload>\n\n" each): the writer's stream
  /// buffer.
  std::string& buffer() { return writer_.stream_buffer(); }

  /// Whether the current response is a stream whose head is queued.
  bool started() const { return started_; }

  /// Queues the stream's head unless it is queued: chunked for HTTP/1.1, close-delimited for
  /// HTTP/1.0 (which then clears `how.keep_alive`). Returns whether it queued it now.
  bool start(framing& how);

  /// Whether more than `max_unsent_bytes` of the stream wait unsent: the client reads too
  /// slowly.
  bool too_much_unsent() const { return writer_.queued_stream_bytes() > max_unsent_bytes_; }

  /// `events` events (none: nothing happens) were rendered into `buffer()`: they are written now
  /// with whatever waits, or wait for the following ones. `opens_choice`: they include a choice's
  /// first event (its time to first token), so they never wait.
  void send(std::size_t events, bool opens_choice);

  /// Queues the stream's end, due at once with everything that waits (the caller flushes).
  void end();

  /// The response is written: the next one starts without a head and with nothing waiting.
  void reset();

  /// The connection closes: nothing waits any more and the timer stops.
  void close();

 private:
  // Writes what waits.
  void release();
  // Wakes at the waiting events' deadline and writes them.
  void arm_timer(std::shared_ptr<void> owner);

  response_writer& writer_;
  stream_pacer pacer_;
  // Writes the stream's waiting events at their deadline.
  boost::asio::steady_timer timer_;
  std::size_t max_unsent_bytes_;
  flush_handler flush_;
  owner_handler owner_;
  bool timer_armed_ = false;
  bool started_ = false;
};

}  // namespace conveyor::server::detail
