// How Conveyor's error codes look over HTTP: the one mapping from `conveyor::ec` to an HTTP
// status, OpenAI's error `type` and a Retry-After hint.
#pragma once

#include <cstdint>

namespace conveyor {

// Declared in common/error.hpp; an opaque declaration keeps CAF headers out of this one.
enum class ec : uint8_t;

}  // namespace conveyor

namespace conveyor::server {

/// The HTTP face of one error code.
struct http_error_info {
  /// HTTP status code, e.g. 429.
  unsigned status = 500;
  /// OpenAI's error `type`, e.g. "invalid_request_error".
  const char* type = "server_error";
  /// Seconds for a `Retry-After` header; 0 means no header.
  int32_t retry_after_s = 0;
};

/// Maps an error code to its HTTP status, OpenAI error type and Retry-After hint:
///
/// | ec                               | status | type                  | Retry-After |
/// |----------------------------------|--------|-----------------------|-------------|
/// | bad_request, prompt_too_long     | 400    | invalid_request_error |             |
/// | rejected_queue_full              | 429    | rate_limit_error      | 1           |
/// | cancelled                        | 499    | cancelled_error       |             |
/// | executor_lost, model_failure,    | 500    | server_error          |             |
/// | internal, bad_file, bad_config,  |        |                       |             |
/// | none (a bug)                     |        |                       |             |
/// | shutting_down                    | 503    | server_error          | 1           |
/// | expired                          | 504    | timeout_error         |             |
///
/// 499 is nginx's "client closed request": the client normally never sees it, since a request
/// is cancelled because its client went away; it shows in logs and metrics.
http_error_info to_http_error(ec code);

}  // namespace conveyor::server
