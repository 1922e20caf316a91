// tokenizer.json "added_tokens": tokens matched in the text before normalization and
// pre-tokenization (special or not), with their lstrip/rstrip/single_word/normalized flags.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/error.hpp"

namespace conveyor::tokenizers::hf {

/// One added token.
struct added_token {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  /// Matched in the normalized text (true) or in the raw text (false).
  bool normalized = false;
  /// Special tokens decode to nothing (skip_special_tokens).
  bool special = false;
};

/// A stretch of text between matches, or one matched token.
struct text_segment {
  std::string_view text;
  /// The added token's id, or -1 for plain text.
  int32_t id = -1;
  /// Offset of `text` in the string that was split.
  size_t offset = 0;
};

/// The added tokens of one group (matched on raw or on normalized text), with the
/// leftmost-longest matching of the tokenizers library; immutable.
class added_token_matcher {
 public:
  /// Builds a matcher over `tokens` (empty contents are ignored).
  explicit added_token_matcher(std::vector<added_token> tokens = {});

  /// Splits `text` into plain segments and matched tokens, in order, calling `emit` for each
  /// non-empty plain segment and each match.
  template <class F>
  void split(std::string_view text, F&& emit) const {
    size_t plain_begin = 0;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t begin = 0;
      size_t end = 0;
      const added_token* found = match_at(text, pos, plain_begin, begin, end);
      if (found == nullptr) {
        ++pos;
        continue;
      }
      if (begin > plain_begin)
        emit(text_segment{text.substr(plain_begin, begin - plain_begin), -1, plain_begin});
      emit(text_segment{text.substr(begin, end - begin), found->id, begin});
      plain_begin = end;
      pos = end;
    }
    if (plain_begin < text.size()) emit(text_segment{text.substr(plain_begin), -1, plain_begin});
  }

  /// Whether there is nothing to match.
  bool empty() const { return tokens_.empty(); }

 private:
  /// The token matched at `pos` (the longest), with its extent after lstrip/rstrip, or nullptr.
  /// A match that fails single_word is skipped (pos moves past it as plain text).
  const added_token* match_at(std::string_view text, size_t& pos, size_t plain_begin, size_t& begin,
                              size_t& end) const;
  std::vector<added_token> tokens_;
  /// For each first byte, the indices of the tokens starting with it, longest first.
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
};

/// Parses the "added_tokens" list; errors name `origin`.
expected<std::vector<added_token>> parse_added_tokens(const nlohmann::json& value,
                                                      const std::string& origin);

}  // namespace conveyor::tokenizers::hf
