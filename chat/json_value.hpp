// JSON as a template's values: what a request carries (tools, a tool call's arguments) handed
// to a chat template as transformers hands Python's json.loads of it, keys in their order.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/value.hpp"
#include "common/error.hpp"

namespace conveyor::chat {

/// `j` as a value: objects as maps in their key order (parse with ordered_json to keep the
/// client's), arrays as lists, integers as integers (an unsigned one beyond 64-bit signed
/// range as a float), floats, strings, booleans and null as none. Nesting deeper than
/// max_template_nesting gives ec::bad_request.
expected<value> value_from_json(const nlohmann::ordered_json& j);

/// Python's json.dumps(x, ensure_ascii=False) of `j` (keys in their order, ", " and ": "
/// separators, floats as Python writes them): the form every tool call's arguments take. Empty
/// when `j` nests too deep.
std::string python_json(const nlohmann::ordered_json& j);

/// JSON's whitespace: space, line feed, tab, carriage return.
inline bool is_json_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/// Parses `text` (ordered_json) and converts it as value_from_json; invalid JSON gives
/// ec::bad_request with the parser's words.
expected<value> value_from_json_text(std::string_view text);

}  // namespace conveyor::chat
