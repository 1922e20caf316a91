#include "common/error.hpp"

#include <ostream>

namespace conveyor {

const char* to_string(ec x) {
  switch (x) {
    case ec::none:
      return "none";
    case ec::bad_request:
      return "bad_request";
    case ec::prompt_too_long:
      return "prompt_too_long";
    case ec::rejected_queue_full:
      return "rejected_queue_full";
    case ec::expired:
      return "expired";
    case ec::cancelled:
      return "cancelled";
    case ec::executor_lost:
      return "executor_lost";
    case ec::shutting_down:
      return "shutting_down";
    case ec::bad_file:
      return "bad_file";
    case ec::bad_config:
      return "bad_config";
    case ec::model_failure:
      return "model_failure";
    case ec::internal:
      return "internal";
  }
  return "unknown";
}

bool operator==(const error& x, const error& y) {
  return x.code == y.code && x.message == y.message;
}

bool operator!=(const error& x, const error& y) {
  return !(x == y);
}

std::string to_string(const error& x) {
  std::string result = to_string(x.code);
  if (x && !x.message.empty()) result += ": " + x.message;
  return result;
}

std::ostream& operator<<(std::ostream& out, const error& x) {
  return out << to_string(x);
}

error make_error(ec code, std::string message) {
  return error{code, std::move(message)};
}

ec code_of(const error& err) {
  return err.code;
}

std::string message_of(const error& err) {
  if (!err) return {};
  return err.message;
}

}  // namespace conveyor
