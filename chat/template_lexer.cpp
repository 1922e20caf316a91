#include "chat/template_lexer.hpp"

#include <algorithm>
#include <cctype>

#include "chat/python_text.hpp"

namespace conveyor::chat {

namespace {

// Newlines as Jinja normalizes them (\r\n and \r become \n), one trailing newline dropped
// (keep_trailing_newline=False).
std::string normalize(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class lexer {
 public:
  explicit lexer(std::string_view source) : src_(normalize(source)) {}

  std::vector<template_token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      auto open = find_open(pos_);
      std::string text = src_.substr(pos_, open - pos_);
      int text_line = line_;
      if (open == src_.size()) {
        push_text(std::move(text), text_line);
        break;
      }
      char kind = src_[open + 1];  // '{', '%' or '#'
      char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (sign == '-') {
        auto end = text.find_last_not_of(" \t\n\r\v\f");
        text.erase(end == std::string::npos ? 0 : end + 1);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: spaces and tabs between a line's start and a block or comment go.
        auto nl = text.rfind('\n');
        std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            std::all_of(text.begin() + static_cast<std::ptrdiff_t>(l_pos), text.end(), is_py_space))
          text.erase(l_pos);
      }
      line_ += static_cast<int>(std::count(src_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                           src_.begin() + static_cast<std::ptrdiff_t>(open), '\n'));
      push_text(std::move(text), text_line);
      pos_ = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      bool strip_after = false;
      if (kind == '#') {
        auto close = src_.find("#}", pos_);
        if (close == std::string::npos)
          throw template_error(line_, "chat template line " + std::to_string(line_) +
                                          ": unclosed comment '{#'");
        strip_after = close > pos_ && src_[close - 1] == '-';
        line_ += static_cast<int>(std::count(src_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                             src_.begin() + static_cast<std::ptrdiff_t>(close),
                                             '\n'));
        pos_ = close + 2;
      } else {
        strip_after = tag(kind == '{');
      }
      if (strip_after) {
        auto start = pos_;
        while (pos_ < src_.size() && is_py_space(src_[pos_])) {
          if (src_[pos_] == '\n') ++line_;
          ++pos_;
        }
        line_starting = pos_ > start && src_[pos_ - 1] == '\n';
      } else if (kind != '{' && pos_ < src_.size() && src_[pos_] == '\n') {
        ++pos_;  // trim_blocks
        ++line_;
        line_starting = true;
      } else {
        line_starting = false;
      }
    }
    tokens_.push_back({template_token::kind::end, "", line_});
    return std::move(tokens_);
  }

 private:
  std::size_t find_open(std::size_t from) const {
    for (auto i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return src_.size();
  }

  void push_text(std::string text, int line) {
    if (!text.empty()) tokens_.push_back({template_token::kind::text, std::move(text), line});
  }

  [[noreturn]] void fail(const std::string& what) const { fail_at_line(line_, what); }

  // Tokenizes a tag's inside up to its end; returns whether it ends with `-`.
  bool tag(bool variable) {
    using k = template_token::kind;
    const char* close = variable ? "}}" : "%}";
    int open_line = line_;
    tokens_.push_back({variable ? k::variable_begin : k::block_begin, "", line_});
    int depth = 0;  // brackets, so that `{{ {'a': 1} }}` ends at the right braces
    while (true) {
      while (pos_ < src_.size() && is_py_space(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size())
        throw template_error(open_line, "chat template line " + std::to_string(open_line) +
                                            ": unclosed '" + (variable ? "{{" : "{%") + "'");
      std::string_view rest{src_.data() + pos_, src_.size() - pos_};
      if (depth == 0 && rest.substr(0, 3) == std::string{"-"} + close) {
        pos_ += 3;
        tokens_.push_back({variable ? k::variable_end : k::block_end, "", line_});
        return true;
      }
      if (depth == 0 && rest.substr(0, 2) == close) {
        pos_ += 2;
        tokens_.push_back({variable ? k::variable_end : k::block_end, "", line_});
        return false;
      }
      char c = rest[0];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t n = 1;
        while (n < rest.size() &&
               (std::isalnum(static_cast<unsigned char>(rest[n])) || rest[n] == '_'))
          ++n;
        tokens_.push_back({k::name, std::string{rest.substr(0, n)}, line_});
        pos_ += n;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        std::size_t n = 0;
        bool is_float = false;
        while (n < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[n])) ||
                                   rest[n] == '_'))
          ++n;
        if (n + 1 < rest.size() && rest[n] == '.' &&
            std::isdigit(static_cast<unsigned char>(rest[n + 1]))) {
          is_float = true;
          ++n;
          while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n]))) ++n;
        }
        if (n < rest.size() && (rest[n] == 'e' || rest[n] == 'E')) {
          std::size_t m = n + 1;
          if (m < rest.size() && (rest[m] == '+' || rest[m] == '-')) ++m;
          if (m < rest.size() && std::isdigit(static_cast<unsigned char>(rest[m]))) {
            is_float = true;
            n = m;
            while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n]))) ++n;
          }
        }
        std::string digits;
        for (char d : rest.substr(0, n))
          if (d != '_') digits += d;
        tokens_.push_back({is_float ? k::floating : k::integer, digits, line_});
        pos_ += n;
      } else if (c == '\'' || c == '"') {
        string_literal(c);
      } else {
        static const char* two[] = {"//", "**", "==", "!=", ">=", "<="};
        std::string op;
        for (const char* t : two)
          if (rest.substr(0, 2) == t) op = t;
        if (op.empty()) {
          if (std::string_view{"+-*/%~<>()[]{}.,:|="}.find(c) == std::string_view::npos)
            fail(std::string{"unexpected character '"} + c + "'");
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        tokens_.push_back({k::op, op, line_});
        pos_ += op.size();
      }
    }
  }

  void string_literal(char quote) {
    int start_line = line_;
    std::string out;
    std::size_t i = pos_ + 1;
    for (; i < src_.size() && src_[i] != quote; ++i) {
      char c = src_[i];
      if (c == '\n') ++line_;
      if (c != '\\' || i + 1 >= src_.size()) {
        out += c;
        continue;
      }
      char e = src_[++i];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '\\':
        case '\'':
        case '"':
          out += e;
          break;
        case '\n':
          ++line_;
          break;
        default:
          out += '\\';
          out += e;
      }
    }
    if (i >= src_.size())
      throw template_error(start_line, "chat template line " + std::to_string(start_line) +
                                           ": unclosed string literal");
    tokens_.push_back({template_token::kind::string, std::move(out), start_line});
    pos_ = i + 1;
  }

  std::string src_;
  std::size_t pos_ = 0;
  int line_ = 1;
  std::vector<template_token> tokens_;
};

}  // namespace

void fail_at_line(int line, const std::string& what) {
  throw template_error(line, "chat template line " + std::to_string(line) + ": " + what);
}

std::vector<template_token> tokenize_template(std::string_view source) {
  return lexer{source}.run();
}

}  // namespace conveyor::chat
