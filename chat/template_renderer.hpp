// Renders a parsed chat template over a set of variables, with Jinja's semantics for
// undefined values, loop scopes, namespaces and the filters chat templates use.
#pragma once

#include <ctime>
#include <string>

#include "chat/chat_template.hpp"
#include "chat/template_ast.hpp"
#include "chat/template_lexer.hpp"
#include "chat/value.hpp"

namespace conveyor::chat {

/// `raise_exception(message)` was called: the template refuses the input.
struct template_raised : std::runtime_error {
  explicit template_raised(const std::string& message) : std::runtime_error(message) {}
};

/// Renders `program` with the top-level `variables` (a map) within `limits`; `strftime_now`
/// formats `now`. Throws
/// template_raised for raise_exception and template_error for what Jinja would fail on (an
/// attribute of an undefined value, a filter on a value of the wrong type, ...), for integer
/// arithmetic whose result does not fit in 64 bits, and for a passed limit.
std::string render_template(const template_program& program, const value& variables,
                            const render_limits& limits, const std::tm& now);

}  // namespace conveyor::chat
