#include "grammar/choice.hpp"

#include <cstdio>

namespace conveyor::grammar {

namespace {

// `s` as an EBNF string literal: quotes and backslashes escaped, control bytes and 0x7f as
// \u00HH (four digits: xgrammar reads \x with any number of hex digits, so "\x10" and a "4"
// after it would be one escape); the bytes of UTF-8 characters stay as they are (the grammar
// reads UTF-8).
void append_literal(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  out += '"';
}

}  // namespace

std::string choice_ebnf(const std::vector<std::string>& choices) {
  std::string out = "root ::= ";
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (i) out += " | ";
    // An empty choice is the empty sequence.
    if (choices[i].empty())
      out += "\"\"";
    else
      append_literal(out, choices[i]);
  }
  return out;
}

}  // namespace conveyor::grammar
