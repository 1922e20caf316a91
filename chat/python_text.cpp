// Python's str semantics on UTF-8 bytes.
#include "chat/python_text.hpp"

#include <algorithm>
#include <cstdlib>

namespace conveyor::chat {

namespace {

// The number of bytes of the UTF-8 character that starts with `c` (1 for a stray byte).
std::size_t char_length(unsigned char c) {
  if (c >= 0xf0) return 4;
  if (c >= 0xe0) return 3;
  if (c >= 0xc0) return 2;
  return 1;
}

char upper(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}
char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

}  // namespace

std::vector<std::size_t> char_starts(std::string_view s) {
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < s.size(); i += char_length(static_cast<unsigned char>(s[i])))
    starts.push_back(i);
  starts.push_back(s.size());
  return starts;
}

std::string_view char_at(std::string_view s, const std::vector<std::size_t>& starts,
                         std::size_t i) {
  const auto end = std::min(starts[i + 1], s.size());
  return s.substr(starts[i], end - starts[i]);
}

bool is_py_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string strip(const std::string& s, const value& chars, bool left, bool right) {
  auto drop = [&](char c) {
    if (chars.is_string()) return chars.as_string().find(c) != std::string::npos;
    return is_py_space(c);
  };
  std::size_t b = 0, e = s.size();
  if (left)
    while (b < e && drop(s[b])) ++b;
  if (right)
    while (e > b && drop(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string upper(std::string s) {
  for (auto& c : s) c = upper(c);
  return s;
}

std::string lower(std::string s) {
  for (auto& c : s) c = lower(c);
  return s;
}

std::string title(std::string s) {
  bool start = true;
  for (auto& c : s) {
    if (is_alpha(c)) {
      c = start ? upper(c) : lower(c);
      start = false;
    } else {
      start = true;
    }
  }
  return s;
}

std::string capitalize(const std::string& s) {
  auto out = lower(s);
  if (!out.empty()) out[0] = upper(out[0]);
  return out;
}

bool parse_float(const std::string& s, double& d) {
  if (s.empty() || s.find_first_of("xXpP") != std::string::npos) return false;
  char* end = nullptr;
  d = std::strtod(s.c_str(), &end);
  return end && *end == '\0';
}

}  // namespace conveyor::chat
