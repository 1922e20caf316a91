// A compiled PCRE2 pattern (UTF, Unicode properties, JIT where available) for the tokenizer.json
// pre-tokenizers: \p{L}, \p{N} and friends come from PCRE2's Unicode tables.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace conveyor::model::hf {

/// One regular expression, compiled once; find() may be called from many threads at once (each
/// thread gets its own match data).
class regex {
 public:
  /// Compiles `pattern` with PCRE2_UTF | PCRE2_UCP; `origin` names the file and key in errors.
  static expected<regex> compile(const std::string& pattern, const std::string& origin);

  /// Finds the first match in `text` at or after `start`; returns false when none. `text` must
  /// be valid UTF-8 (the tokenizer checks once per encode). An empty match is reported as such.
  bool find(std::string_view text, size_t start, size_t& match_begin, size_t& match_end) const;

  /// The pattern as written.
  const std::string& pattern() const { return pattern_; }

 private:
  struct compiled;
  std::shared_ptr<const compiled> code_;
  std::string pattern_;
};

}  // namespace conveyor::model::hf
