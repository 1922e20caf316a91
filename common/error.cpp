#include "common/error.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/deep_to_string.hpp>
#include <caf/message.hpp>

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

caf::error make_error(ec code, std::string message) {
  return caf::error{static_cast<uint8_t>(code), error_category,
                    caf::make_message(std::move(message))};
}

caf::error make_error(ec code) {
  return caf::error{static_cast<uint8_t>(code), error_category};
}

ec code_of(const caf::error& err) {
  if (!err) return ec::none;
  if (err.category() != error_category) return ec::internal;
  return static_cast<ec>(err.code());
}

std::string message_of(const caf::error& err) {
  if (!err) return {};
  if (err.category() == error_category) {
    const auto& ctx = err.context();
    if (ctx.match_elements<std::string>()) return ctx.get_as<std::string>(0);
    return to_string(static_cast<ec>(err.code()));
  }
  return caf::to_string(err);
}

void add_error_category(caf::actor_system_config& cfg) {
  cfg.add_error_category(error_category,
                         [](uint8_t code, caf::atom_value, const caf::message& ctx) -> std::string {
                           std::string result = to_string(static_cast<ec>(code));
                           if (ctx.match_elements<std::string>())
                             result += ": " + ctx.get_as<std::string>(0);
                           return result;
                         });
}

}  // namespace conveyor
