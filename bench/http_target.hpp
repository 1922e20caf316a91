// The client side of `conveyor bench --target`: the server's URL, what a stream of server-sent
// events says (plain code that tests can drive), and the open-loop replay of a workload through
// POST /v1/completions with stream: true on the client's event loops (stream_client.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/output_formats.hpp"
#include "bench/sampling_fields.hpp"
#include "bench/stats.hpp"
#include "bench/workload.hpp"
#include "common/error.hpp"

namespace conveyor::bench {

// -- URL -----------------------------------------------------------------------------------------

/// Where the server is: "http://HOST:PORT" (an optional path prefix before /v1 is kept).
struct target_url {
  std::string host;
  std::string port = "80";
  /// Prefix of the API path, e.g. "" or "/proxy"; the request goes to prefix + "/v1/completions".
  std::string prefix;
};

/// Parses "http://HOST[:PORT][/PREFIX]"; https is not supported.
expected<target_url> parse_target_url(const std::string& url);

// -- server-sent events --------------------------------------------------------------------------

/// What one `data:` payload of a completion stream says.
struct stream_event {
  /// The payload was "[DONE]".
  bool done = false;
  /// Text of the first choice: its `text` (completions) or `delta.content` (chat); may be empty.
  std::string text;
  /// An `{"error": ...}` payload: its message, and whether its type is a refusal
  /// (invalid_request_error or rate_limit_error).
  std::optional<std::string> error;
  bool refused = false;
  /// From a usage chunk (stream_options.include_usage): `completion_tokens`, `prompt_tokens`
  /// and `prompt_tokens_details.cached_tokens`, each when present.
  std::optional<int32_t> completion_tokens;
  std::optional<int32_t> prompt_tokens;
  std::optional<int32_t> cached_tokens;
  /// The choice's finish_reason when set.
  std::optional<std::string> finish_reason;
};

/// Interprets one data payload; a payload that is not JSON gives an `error`.
stream_event parse_stream_event(const std::string& data);

/// Folds the events of one request into its record: chunks with non-empty text stamp
/// `chunk_times` at `now` (seconds after the scheduled arrival) and add to its `text`; a usage
/// chunk gives its token counts.
class completion_stream {
 public:
  /// One event's payload arrived at `now`.
  void on_data(const std::string& data, double now);

  /// The stream ended at `now` (HTTP status, and an error of the connection if any).
  request_record finish(unsigned http_status, const std::string& transport_error, double now);

 private:
  request_record record_;
  int32_t text_chunks_ = 0;
  std::optional<int32_t> usage_tokens_;
  std::optional<int32_t> prompt_tokens_;
  std::optional<int32_t> cached_tokens_;
  bool done_ = false;
  bool finished_ = false;
  std::optional<std::string> error_;
  bool refused_ = false;
  std::string body_;
};

// -- the driver ----------------------------------------------------------------------------------

/// What each request of a target run asks for.
struct target_options {
  target_url url;
  /// The "model" field; left out when empty.
  std::string model;
  /// The sampling fields of every request (see `add_to_body`: temperature is always sent).
  sampling_fields sampling;
  /// Which requests ask for an output format (`constrained`), with `add_format_to_body`.
  output_formats formats;
  /// Give up on connecting, and on a response once its request is sent, after this many seconds.
  double timeout_s = 600;
  /// Event-loop threads of the client; 0: one per core, at most four.
  int32_t client_threads = 0;
};

/// How long a target run took, and what it cost the client.
struct run_timing {
  /// Seconds from t0 to the last end.
  double wall_s = 0;
  /// CPU seconds of this process from t0 until every request had ended and the client's threads
  /// were joined (process_cpu_seconds).
  double cpu_s = 0;
};

/// Replays `requests` against the server in open loop: one connection per request, on
/// `client_threads` event-loop threads (hundreds of requests can be in flight), each started at
/// t0 + arrival_s; a request fails when connecting, or its response once the request is sent,
/// takes over `timeout_s`. Returns when every request has ended, with one record per request in
/// workload order, and sets `timing`.
std::vector<request_record> run_target(const workload& requests, const target_options& options,
                                       run_progress& progress, run_timing& timing);

}  // namespace conveyor::bench
