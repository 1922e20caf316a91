// Internal: the JSON schemas that force a chat answer into tool calls, as vLLM builds them
// (tool_choice a named function: its arguments; "required": an array of calls).
#pragma once

#include <string>
#include <vector>

#include "server/tool_fields.hpp"

namespace conveyor::server::detail {

/// tool_choice naming `tool`: the output is its arguments, so the schema is its parameters.
std::string named_tool_schema(const function_tool& tool);

/// tool_choice "required": a JSON array of at least one call (at most one when
/// `parallel_tool_calls` is false), each {"name": one function's name (an enum of it),
/// "parameters": that function's parameters}, the functions as anyOf alternatives. Each
/// function's `$defs` move to the root, where the `$ref`s of parameters now nested deeper still
/// find them; two functions defining one name differently is a field_error on "tools".
std::string required_tools_schema(const std::vector<function_tool>& tools, bool parallel);

}  // namespace conveyor::server::detail
