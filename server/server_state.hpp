// Internal: what the acceptor and every connection of one http_server share. Asio types only;
// Beast stays inside the connection's files (connection, router, response_writer).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "server/backend.hpp"
#include "server/http_server.hpp"
#include "server/log_limiter.hpp"

namespace conveyor::server::detail {

/// Seconds since the Unix epoch: the `created` field of responses and the server's start.
int64_t unix_now();

namespace net = boost::asio;
using tcp = net::ip::tcp;

/// Lets backend threads post onto connection strands only while the io_context exists: the
/// server closes the gate (under the mutex) before it destroys the io_context.
struct post_gate {
  /// Held while a backend thread posts; taken by `stop` to close the gate.
  std::mutex mutex;
  /// False once the server stopped; posts are then dropped.
  bool open = true;
};

/// What the server asks of one connection.
class connection {
 public:
  virtual ~connection() = default;

  /// Ends the connection soon, from any thread (posts onto its strand): an idle connection
  /// closes at once, a running completion ends with a `shutting_down` error, a response being
  /// written is finished first.
  virtual void shutdown() = 0;

  /// Has the connection look at its deadlines soon, from any thread (posts onto its strand):
  /// after the deadline clock moved (`http_server::advance_deadline_clock`).
  virtual void check_deadlines() = 0;
};

/// Counters of the HTTP layer, for `GET /metrics`. Thread-safe.
class http_counters {
 public:
  /// Counts one response with HTTP status `status`.
  void count_response(unsigned status);

  /// Counts one request cancelled because its client went away.
  void count_client_gone() { client_gone_ += 1; }

  /// Counts one connection closed because its client read too slowly.
  void count_slow_client() { slow_clients_ += 1; }

  /// Counts one connection closed because its request head did not arrive in time.
  void count_head_timeout() { head_timeouts_ += 1; }

  /// Counts one connection refused at accept (too many in all, or from one address).
  void count_refused() { refused_ += 1; }

  /// Renders the counters as Prometheus text, with the open connection and running request
  /// gauges given.
  std::string render(std::size_t open_connections, int64_t running_requests) const;

 private:
  mutable std::mutex mutex_;
  std::map<unsigned, uint64_t> responses_;
  std::atomic<uint64_t> client_gone_{0};
  std::atomic<uint64_t> slow_clients_{0};
  std::atomic<uint64_t> head_timeouts_{0};
  std::atomic<uint64_t> refused_{0};
};

/// The state of one http_server. Member order matters: the io_context is destroyed before the
/// registry and the gate, because destroying it destroys connections, which unregister.
struct server_state {
  /// Makes the state; nothing runs yet.
  server_state(server_options opts, completion_backend& be);

  // -- fixed after construction ------------------------------------------------------------------

  /// The settings.
  const server_options options;
  /// The backend (outlives the server).
  completion_backend& backend;
  /// The model name reported in every answer.
  const std::string model;
  /// Unix time in seconds of construction (the model's `created`).
  const int64_t created_at;
  /// Shared with every backend callback.
  const std::shared_ptr<post_gate> gate = std::make_shared<post_gate>();
  /// HTTP counters.
  http_counters counters;

  // -- flags, any thread -------------------------------------------------------------------------

  /// Set by `set_ready`.
  std::atomic<bool> ready{false};
  /// Set by `begin_drain` and `stop`: new completions get 503.
  std::atomic<bool> draining{false};
  /// Set once the drain finished (no request runs or the drain timeout passed).
  std::atomic<bool> drain_finished{false};
  /// Set by `stop` before the I/O threads end; nothing is posted afterwards.
  std::atomic<bool> stopped{false};
  /// Completions running (counted by connections).
  std::atomic<int64_t> running_jobs{0};
  /// The bound port.
  std::atomic<uint16_t> bound_port{0};

  // -- the clock of connection deadlines ---------------------------------------------------------

  /// How far `advance_deadline_clock` moved the deadline clock beyond the steady clock, in
  /// nanoseconds; only ever grows.
  std::atomic<int64_t> deadline_clock_offset_ns{0};
  /// Now on the clock of the connection deadlines (the request head's and the idle wait's): the
  /// steady clock plus `deadline_clock_offset_ns`. It never runs behind the steady clock, so a
  /// steady timer set to a deadline's distance finds that deadline passed when it fires.
  std::chrono::steady_clock::time_point deadline_now() const {
    return std::chrono::steady_clock::now() +
           std::chrono::nanoseconds{deadline_clock_offset_ns.load()};
  }

  // -- connections -------------------------------------------------------------------------------

  /// A live connection and its client's address.
  struct registered_connection {
    /// The connection.
    std::weak_ptr<connection> conn;
    /// The client's IP address, as `connections_from` counts it.
    std::string address;
    /// False for a connection refused at accept: it only answers 503 or 429 and closes, and
    /// counts toward no limit (else a burst of refusals would refuse the clients after it).
    bool counted = true;
  };

  /// Guards `connections` and `per_address`.
  std::mutex registry_mutex;
  /// Notified when a connection unregisters.
  std::condition_variable registry_cv;
  /// Every live connection.
  std::unordered_map<const connection*, registered_connection> connections;
  /// Live counted connections by client address.
  std::unordered_map<std::string, std::size_t> per_address;
  /// Live counted connections.
  std::size_t counted_connections = 0;

  /// Registers a new connection from `address`; `counted` is false for one refused at accept.
  void add_connection(const std::shared_ptr<connection>& conn, const std::string& address,
                      bool counted);
  /// Number of live connections from `address`.
  std::size_t connections_from(const std::string& address);
  /// Unregisters a connection (from its destructor).
  void remove_connection(const connection* conn);
  /// Number of live connections that were not refused (what `max_connections` bounds).
  std::size_t connection_count();
  /// Every live connection, copied out of the registry.
  std::vector<std::shared_ptr<connection>> live_connections();
  /// Calls `shutdown` on every live connection.
  void shutdown_connections();
  /// Calls `check_deadlines` on every live connection.
  void check_connection_deadlines();

  /// A connection started a completion.
  void job_started() { running_jobs += 1; }
  /// A connection's completion ended (any way); finishes a drain when it was the last one.
  void job_ended();
  /// Ends the drain: shuts every connection down and wakes `wait`. On `control` only.
  void finish_drain();
  /// The Prometheus text of the HTTP layer.
  std::string metrics_text();

  // -- lifecycle ---------------------------------------------------------------------------------

  /// Serialises start, stop and wait.
  std::mutex lifecycle_mutex;
  /// Guards `wake_waiters`.
  std::mutex wait_mutex;
  /// Notified when `wake_waiters` becomes true.
  std::condition_variable wait_cv;
  /// True once a drain finished or stop was called.
  bool wake_waiters = false;
  /// True after a successful `start`.
  bool started = false;

  // -- Asio (destroyed first) --------------------------------------------------------------------

  /// Runs every connection, the acceptor and the timers.
  net::io_context io;
  /// Keeps `io.run()` going while the server runs.
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  /// Strand of the acceptor and the drain timer.
  net::strand<net::io_context::executor_type> control;
  /// The listening socket.
  tcp::acceptor acceptor;
  /// Fires when the drain timeout passed.
  net::steady_timer drain_timer;
  /// Retries accepting after an accept error (e.g. out of file descriptors).
  net::steady_timer accept_retry;
  /// The I/O threads.
  std::vector<std::thread> threads;

  // -- refusing connections (on `control`) -------------------------------------------------------

  /// Rate-limits "refusing a connection" warnings: all connections in use.
  log_limiter refused_full_log{options.log_repeat_interval};
  /// Rate-limits "refusing a connection" warnings: too many from one address.
  log_limiter refused_address_log{options.log_repeat_interval};
  /// Writes the count of warnings held back at the end of a burst.
  net::steady_timer refusal_log_timer;
  /// `refusal_log_timer` is waiting.
  bool refusal_log_timer_armed = false;
  /// The address of the latest connection refused for its address (named by a held-back line).
  std::string last_refused_address;
};

}  // namespace conveyor::server::detail
