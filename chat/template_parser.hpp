// Parses a chat template into a syntax tree, refusing at once (with the construct and its line)
// anything outside the supported Jinja subset.
#pragma once

#include <string_view>

#include "chat/template_ast.hpp"
#include "chat/template_lexer.hpp"

namespace conveyor::chat {

/// Parses `source`. Throws template_error ("chat template line 3: unsupported tag 'call'")
/// for syntax errors and unsupported tags, filters, tests, functions or methods.
template_program parse_template(std::string_view source);

/// The filters, tests, global functions and methods the renderer implements.
bool is_supported_filter(std::string_view name);
bool is_supported_test(std::string_view name);
bool is_supported_function(std::string_view name);
bool is_supported_method(std::string_view name);

}  // namespace conveyor::chat
