// Splits a chat template into text and tag tokens the way transformers' Jinja environment does:
// one trailing newline dropped, `{%-`/`-%}` whitespace control, trim_blocks and lstrip_blocks.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::chat {

/// A template that cannot be read or rendered: the line (1-based) and what is wrong.
struct template_error : std::runtime_error {
  template_error(int line, const std::string& what) : std::runtime_error(what), line(line) {}
  int line;
};

/// Throws the template_error of `line`: "chat template line N: what".
[[noreturn]] void fail_at_line(int line, const std::string& what);

/// One token of a template.
struct template_token {
  enum class kind {
    text,            // literal output
    variable_begin,  // {{
    variable_end,    // }}
    block_begin,     // {%
    block_end,       // %}
    name,            // identifier or keyword
    string,          // string literal, unescaped
    integer,
    floating,
    op,  // operator or punctuation: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } . , : |
    end,  // end of the template
  };
  kind type = kind::end;
  std::string text;
  int line = 1;
};

/// Tokenizes a template with trim_blocks and lstrip_blocks on (as transformers renders).
/// Comments are dropped. Throws template_error for an unclosed tag or string.
std::vector<template_token> tokenize_template(std::string_view source);

}  // namespace conveyor::chat
