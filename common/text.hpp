// Byte-string helpers that several folders share: searching in linear time, replacing every
// occurrence, and counting the code points of UTF-8 text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

/// Finds a needle in texts in linear time (Knuth-Morris-Pratt): a search of a long text for a
/// long needle costs their lengths, never their product. Holds a view of the needle, which must
/// outlive it.
class text_finder {
 public:
  explicit text_finder(std::string_view needle);

  /// The first occurrence in `text` at or after `from`, or npos. An empty needle is found at
  /// `from` (npos past the end).
  std::size_t find(std::string_view text, std::size_t from) const;

 private:
  std::string_view needle_;
  // border_[i]: the length of the longest proper border of the needle's first i bytes (-1 for
  // i = 0).
  std::vector<std::ptrdiff_t> border_;
};

/// How much replace_all may do.
struct replace_limits {
  /// The most occurrences replaced, the first ones.
  std::size_t max_count = SIZE_MAX;
  /// The most bytes the result may have.
  std::size_t max_bytes = SIZE_MAX;
};

/// Replaces each occurrence of `from` in `text` by `to`, left to right and without overlap, at
/// most `limits.max_count` of them; an empty `from` occurs nowhere. False, with `text` as it
/// was, when the result would exceed `limits.max_bytes` (found before it is built further).
bool replace_all(std::string& text, std::string_view from, std::string_view to,
                 replace_limits limits = {});

/// The number of code points of UTF-8 text: its bytes that are not continuation bytes
/// (0b10xxxxxx). Invalid text counts each such byte: a stray continuation byte counts nothing,
/// a truncated sequence one.
std::size_t utf8_code_points(std::string_view text);

}  // namespace conveyor
