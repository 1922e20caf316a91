#include "actors/caf_error.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/deep_to_string.hpp>
#include <caf/message.hpp>

namespace conveyor {

caf::error to_caf_error(const error& err) {
  if (!err) return {};
  return caf::error{static_cast<uint8_t>(err.code), error_category, caf::make_message(err.message)};
}

error from_caf_error(const caf::error& err) {
  if (!err) return {};
  if (err.category() != error_category) return error{ec::internal, caf::to_string(err)};
  const auto code = static_cast<ec>(err.code());
  const auto& ctx = err.context();
  if (ctx.match_elements<std::string>()) return error{code, ctx.get_as<std::string>(0)};
  return error{code, to_string(code)};
}

void add_error_category(caf::actor_system_config& cfg) {
  cfg.add_error_category(error_category,
                         [](uint8_t code, caf::atom_value, const caf::message& ctx) -> std::string {
                           std::string message;
                           if (ctx.match_elements<std::string>())
                             message = ctx.get_as<std::string>(0);
                           return to_string(error{static_cast<ec>(code), std::move(message)});
                         });
}

}  // namespace conveyor
