// A compiled PCRE2 pattern (UTF, Unicode properties, JIT where available) for the tokenizer.json
// pre-tokenizers: \p{L}, \p{N} and friends come from PCRE2's Unicode tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace conveyor::tokenizers::hf {

/// One regular expression, compiled once; find() may be called from many threads at once (each
/// thread gets its own match data, match context and JIT stack).
class regex {
 public:
  /// Compiles `pattern` with PCRE2_UTF | PCRE2_UCP; `origin` names the file and key in errors,
  /// those of compile() and those of find().
  static expected<regex> compile(const std::string& pattern, const std::string& origin);

  /// Finds the first match in `text` at or after `start`; returns false when none. `text` must
  /// be valid UTF-8 (the tokenizer checks once per encode). An empty match is reported as such.
  /// Fails (ec::bad_request, naming the origin and the pattern) when PCRE2 cannot finish the
  /// search within match_budget(text.size()) steps or a JIT stack of max_jit_stack bytes: never
  /// a "no match" that would tokenize the rest of the text differently.
  expected<bool> find(std::string_view text, size_t start, size_t& match_begin,
                      size_t& match_end) const;

  /// The pattern as written.
  const std::string& pattern() const { return pattern_; }

  /// PCRE2's match limit for a search in a text of `bytes`: its default (ten million) plus two
  /// per byte. The published pre-tokenizer patterns (GPT-2, Llama 3, Qwen2) backtrack at most
  /// once per character of a whitespace run in one search ("\s*[\r\n]+" gives the run back
  /// before "\s+(?!\S)" matches), so a run of ten million spaces needs more than the default; a
  /// pattern that backtracks exponentially still stops.
  static uint32_t match_budget(size_t bytes);

  /// The most JIT stack one thread's searches may use (PCRE2's default is 32 KiB).
  static constexpr size_t max_jit_stack = size_t{8} << 20;

 private:
  struct compiled;
  std::shared_ptr<const compiled> code_;
  std::string pattern_;
  std::string origin_;
};

}  // namespace conveyor::tokenizers::hf
