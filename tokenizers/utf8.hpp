// UTF-8 helpers shared by the tokenizers and the detokenizer: validate text, classify the
// character at the front of a byte string, and drain the complete characters of a stream.
// Well-formedness is utfcpp's (libutfcpp-dev); what utfcpp lacks is built on it here.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace conveyor::tokenizers {

/// The Unicode replacement character U+FFFD in UTF-8.
inline constexpr std::string_view replacement_character = "\xEF\xBF\xBD";

/// What the bytes at the front of a string hold.
enum class utf8_kind {
  /// A complete, well-formed character of `length` bytes.
  valid,
  /// A well-formed start of a character that the string ends before completing; `length` is
  /// the whole string.
  incomplete,
  /// Bytes that can never start a well-formed character; `length` is the maximal subpart
  /// (Unicode 15, section 3.9) that one U+FFFD replaces, at least 1.
  invalid,
};

/// The classification of the character at the front of a string.
struct utf8_scan {
  /// What the bytes are.
  utf8_kind kind;
  /// How many bytes the classification covers.
  size_t length;
};

/// Whether `text` is well-formed UTF-8 (utfcpp's check: no overlong forms, no surrogates,
/// nothing above U+10FFFF, no truncated character).
bool valid_utf8(std::string_view text);

/// Classifies the character at the front of `bytes`, which must not be empty. Well-formed means
/// the Unicode table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF.
utf8_scan scan_utf8(std::string_view bytes);

/// Removes from the front of `pending` every complete character and returns them, with one
/// U+FFFD for each maximal invalid subpart. Leaves in `pending` only an incomplete trailing
/// character, unless `at_end`, when that one is replaced by U+FFFD too and `pending` ends empty.
std::string drain_utf8(std::string& pending, bool at_end);

}  // namespace conveyor::tokenizers
