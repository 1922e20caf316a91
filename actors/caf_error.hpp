// The boundary between Conveyor's plain errors and CAF's: where an actor hands an error to CAF (a
// handler's result, a reply across the network) and where one comes back.
#pragma once

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/fwd.hpp>

#include "common/error.hpp"

namespace conveyor {

/// The category atom of Conveyor errors inside CAF.
constexpr caf::atom_value error_category = caf::atom("conveyor");

/// The CAF error of `err`: Conveyor's category, the code, and the message as its context; no error
/// for no error.
caf::error to_caf_error(const error& err);

/// The plain error of `err`: code and message of a Conveyor error (the code's name when it carries
/// no message); `ec::internal` and CAF's rendering (`caf::to_string`) for an error of any other
/// category, e.g. a lost connection; no error for no error.
error from_caf_error(const caf::error& err);

/// Registers the renderer of Conveyor's error category with an actor system config, so that
/// `system.render(err)` writes what `to_string(from_caf_error(err))` does: "code: message".
void add_error_category(caf::actor_system_config& cfg);

}  // namespace conveyor
