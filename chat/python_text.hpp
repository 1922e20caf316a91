// Python's str semantics on the UTF-8 bytes of template strings: where characters start (Python
// indexes code points), whitespace, strip, ASCII case mapping and float().
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "chat/value.hpp"

namespace conveyor::chat {

/// Where each character of UTF-8 text starts, by its lead byte (a stray byte is a character of
/// its own), and the text's size at the end.
std::vector<std::size_t> char_starts(std::string_view s);

/// Character `i` of `s` from its starts (a truncated last character is what is left).
std::string_view char_at(std::string_view s, const std::vector<std::size_t>& starts, std::size_t i);

/// Whether Python's str.strip() and str.split() take `c` for whitespace (ASCII's six).
bool is_py_space(char c);

/// Python's strip (`left` and `right`), lstrip or rstrip: drops the bytes found in `chars` when
/// it is a string, else whitespace.
std::string strip(const std::string& s, const value& chars, bool left, bool right);

/// Python's str.upper(), str.lower(), str.title() and str.capitalize() on ASCII letters (other
/// bytes stay as they are).
std::string upper(std::string s);
std::string lower(std::string s);
std::string title(std::string s);
std::string capitalize(const std::string& s);

/// Python's float(s) for stripped `s`: decimal, "inf", "nan" (no hexadecimal, which strtod
/// would take). False when `s` is none of them.
bool parse_float(const std::string& s, double& d);

}  // namespace conveyor::chat
