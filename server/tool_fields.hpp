// Internal: the fields of a chat body about tools: `tools` (the functions offered),
// `tool_choice` and `parallel_tool_calls`, checked and turned into what the template sees, how
// the answer is read, and the constraint that forces a call.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/value.hpp"
#include "sampling/structured_output.hpp"
#include "server/openai.hpp"
#include "server/request_fields.hpp"

namespace conveyor::server::detail {

/// One function a request offers.
struct function_tool {
  /// [a-zA-Z0-9_-]{1,64}.
  std::string name;
  /// Its parameters' JSON schema, keys as the client wrote them; {"type": "object",
  /// "properties": {}} when absent.
  nlohmann::ordered_json parameters;
};

/// What a chat body asks of tools.
struct tool_fields {
  /// `tools`.
  std::vector<function_tool> tools;
  /// The template's `tools`: the request's list as given, or none (no tools, or tool_choice
  /// "none").
  chat::value template_tools = chat::value::none();
  /// How the answer is read.
  tool_call_reading reading;
  /// The constraint on the output that `tool_choice` "required" or a named function asks for
  /// (json_schema, field "tool_choice"); none for "auto" and "none".
  sampling::structured_output constraint;
};

/// Reads `tools`, `tool_choice` and `parallel_tool_calls` of `obj` (`ordered`: the same body
/// parsed keeping its key order; only read when `tools` is not empty). `tools`: an array of
/// {type: "function", function: {name, description?, parameters?, strict?}}, names unique;
/// `tool_choice`: "none", "auto", "required" or {type: "function", function: {name}} naming
/// one of them (absent: "auto" with tools, "none" without); anything but "none" needs tools,
/// and "auto" needs `parser` (model.tool_call_parser) to read the model's calls. A field_error
/// names the field ("tools[1].function.name", "tool_choice").
tool_fields parse_tool_fields(const json& obj, const nlohmann::ordered_json& ordered,
                              std::string_view parser);

}  // namespace conveyor::server::detail
