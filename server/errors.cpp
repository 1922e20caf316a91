#include "server/errors.hpp"

#include "common/error.hpp"

namespace conveyor::server {

http_error_info to_http_error(ec code) {
  switch (code) {
    case ec::bad_request:
    case ec::prompt_too_long:
      return {400, "invalid_request_error", 0};
    case ec::rejected_queue_full:
      return {429, "rate_limit_error", 1};
    case ec::cancelled:
      return {499, "cancelled_error", 0};
    case ec::shutting_down:
      return {503, "server_error", 1};
    case ec::expired:
      return {504, "timeout_error", 0};
    case ec::none:
    case ec::executor_lost:
    case ec::bad_file:
    case ec::bad_config:
    case ec::model_failure:
    case ec::internal:
      return {500, "server_error", 0};
  }
  return {500, "server_error", 0};
}

}  // namespace conveyor::server
