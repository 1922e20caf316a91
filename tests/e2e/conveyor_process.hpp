// The fixture of the end-to-end tests: one real `conveyor serve` process on 127.0.0.1 with a
// free port, stopped with SIGTERM at the end and never left running, even when a test fails.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/server/test_client.hpp"

namespace conveyor::e2e {

using server::test::http_reply;
using server::test::sse_events;
using server::test::test_client;

/// The path of the `conveyor` program this build made.
std::string conveyor_program();

/// The expected stories260K greedy text after "Once upon a time" (60 tokens), without the
/// prompt and without the file's final newline.
std::string expected_once_upon_a_time();

/// A running `conveyor serve --host 127.0.0.1 --port 0 ARGS...`, its working directory the
/// source tree, its stdout and stderr in a log file.
class conveyor_process {
 public:
  /// Starts the server and waits (up to 60 s) for "listening on http://127.0.0.1:PORT" in its
  /// log and for GET /health = 200. On failure `ok()` is false and `error()` says why.
  explicit conveyor_process(const std::vector<std::string>& args);
  /// Kills the process with SIGKILL if it still runs and removes the log file.
  ~conveyor_process();
  conveyor_process(const conveyor_process&) = delete;
  conveyor_process& operator=(const conveyor_process&) = delete;

  /// True when the server started and answered /health with 200.
  bool ok() const { return error_.empty(); }
  /// Why the start failed, with the log so far.
  const std::string& error() const { return error_; }
  /// The port the server listens on.
  uint16_t port() const { return port_; }
  /// The base URL, e.g. "http://127.0.0.1:40123".
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// Sends a signal to the process (no-op once it ended).
  void signal(int sig);
  /// Waits up to `timeout` for the process to end; returns its exit code, 128 + N when signal N
  /// killed it, or -1 when it still runs.
  int wait(std::chrono::milliseconds timeout);
  /// SIGTERM, then `wait(timeout)`; SIGKILL when it did not end in time (returns -1 then).
  int stop(std::chrono::milliseconds timeout = std::chrono::seconds{20});
  /// What the process wrote to stdout and stderr so far.
  std::string log() const;

  /// One request on a fresh connection; nullopt when it fails or times out.
  std::optional<http_reply> request(const std::string& method, const std::string& target,
                                    const std::string& body = "",
                                    std::chrono::milliseconds timeout = std::chrono::seconds{30});
  /// GET /metrics as text ("" on failure).
  std::string metrics();

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
  uint16_t port_ = 0;
  std::string log_path_;
  std::string error_;
};

/// The value of one sample line `NAME VALUE` in Prometheus text (`name` includes the labels,
/// e.g. `conveyor_requests_total{outcome="cancelled"}`); -1 when absent.
double metric_value(const std::string& text, const std::string& name);

/// The text of the first choice of each JSON event of a stream, concatenated.
std::string stream_text(const std::vector<nlohmann::json>& events);

/// The arguments that start the one-slot server of tests/e2e/one_slot.toml (1 slot, a queue of
/// 1, the synthetic s15m model), plus `more`.
std::vector<std::string> one_slot_args(std::vector<std::string> more = {});

/// The body of a streamed greedy request for `max_tokens` tokens of "Once upon a time".
std::string stream_body(int max_tokens);

/// Opens a connection, sends `body` to POST /v1/completions and waits up to 30 s for the first
/// event of its stream; null when it did not come.
std::unique_ptr<test_client> open_stream(uint16_t port, const std::string& body);

/// Runs a command with /bin/sh; its stdout and exit status.
struct command_result {
  std::string out;
  int status = -1;
};
command_result run_shell(const std::string& command);

/// Quotes `s` for /bin/sh.
std::string shell_quote(const std::string& s);

}  // namespace conveyor::e2e
