// Conveyor's error codes: one enum for every way a request or a start-up can fail.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

namespace conveyor {

/// Every error Conveyor reports. 0 is "no error", as CAF requires.
enum class ec : uint8_t {
  /// No error.
  none = 0,
  /// The input is malformed or out of range (a field, a flag, a request body).
  bad_request,
  /// A prompt with its max_tokens does not fit in the context.
  prompt_too_long,
  /// The waiting queue is full (by requests or by tokens).
  rejected_queue_full,
  /// The request's deadline passed before it finished.
  expired,
  /// The client cancelled the request or went away.
  cancelled,
  /// The executor running the request was lost.
  executor_lost,
  /// The server is draining and takes no new work.
  shutting_down,
  /// A file could not be read or has the wrong format or size.
  bad_file,
  /// A configuration key is unknown, of the wrong type or impossible.
  bad_config,
  /// The model could not be loaded or run.
  model_failure,
  /// Anything else that went wrong inside Conveyor.
  internal,
};

/// The category atom of Conveyor errors.
constexpr caf::atom_value error_category = caf::atom("conveyor");

/// Returns the name of `x`, e.g. "rejected_queue_full".
const char* to_string(ec x);

/// Makes an error of Conveyor's category whose context is one human-readable message.
caf::error make_error(ec code, std::string message);

/// Makes an error with no message.
caf::error make_error(ec code);

/// Returns the code of `err` when it is a Conveyor error, `ec::internal` for any other error, and
/// `ec::none` for no error.
ec code_of(const caf::error& err);

/// Returns the message of a Conveyor error (what `make_error` got), or a rendering of any other
/// error. Needs no actor system.
std::string message_of(const caf::error& err);

/// Registers the renderer of Conveyor's error category with an actor system config.
void add_error_category(caf::actor_system_config& cfg);

template <class T>
using expected = caf::expected<T>;

}  // namespace conveyor
