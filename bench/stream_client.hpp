// The event loops of `conveyor bench --target`'s client: streamed POSTs to the target, one
// connection each, on a few threads however many are in flight (a client on the same cores as
// the server costs a thread per core, not one per request), read through the shared response
// reader and SSE parser (client/) into a completion_stream.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "bench/http_target.hpp"
#include "bench/stats.hpp"

namespace conveyor::bench {

/// Event loops, each on its own thread, and the target's resolved address. Work is given to a
/// lane: lane k runs on loop k % loops, which runs all of its handlers, so the work of one lane
/// is never handled by two threads at once.
class client_loops {
 public:
  using clock_type = std::chrono::steady_clock;
  /// Called once, on the lane's thread, with the record of a request that ended.
  using on_end = std::function<void(request_record)>;

  /// Starts `options.client_threads` loops (0: one per core, at most four) and resolves the
  /// target's host.
  explicit client_loops(const target_options& options);

  /// Joins the threads (see `join`).
  ~client_loops();

  client_loops(const client_loops&) = delete;
  client_loops& operator=(const client_loops&) = delete;

  /// Sends POST prefix + `path` with the JSON `body` (stream: true) on `lane`: a connection of
  /// its own, given up when connecting, or the response once the request is sent, takes over
  /// `timeout_s`. The record's times are seconds after `scheduled`. A host that did not resolve
  /// gives a failed record.
  void post(std::size_t lane, const std::string& path, std::string body,
            clock_type::time_point scheduled, on_end done);

  /// Runs `fn` on `lane`'s thread at `when` (at once when it has passed).
  void run_at(std::size_t lane, clock_type::time_point when, std::function<void()> fn);

  /// Lets the loops run out of work and joins their threads; call it once every request has
  /// ended (nothing may be posted afterwards).
  void join();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace conveyor::bench
