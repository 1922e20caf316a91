// UTF-8 classification and stream draining on utfcpp's validation.
//
// utfcpp says whether bytes are well-formed and where well-formed text stops
// (utf8::find_invalid). It does not say what an incremental decoder needs at that point: whether
// the bytes left could still become a character when more arrive, and how many bytes one U+FFFD
// replaces (its replace_invalid swallows a bad sequence with all the continuation bytes after
// it, not the maximal subpart of Unicode 15, section 3.9, that Python and the WHATWG decoder
// replace). Both are answered here by asking utfcpp whether the bytes can be completed into one
// well-formed character.
#include "tokenizers/utf8.hpp"

#include <algorithm>

#include <utf8.h>

namespace conveyor::tokenizers {

namespace {

// Whether `prefix` (one to three bytes) is the start of some well-formed character. Every
// character goes on with continuation bytes; the second byte is restricted only after E0 (A0..BF),
// ED (80..9F), F0 (90..BF) and F4 (80..8F), and 80, A0 or 90 fits each of those, so these endings
// try every way a start can be completed.
bool completable(std::string_view prefix) {
  static constexpr std::string_view endings[] = {"\x80", "\x80\x80", "\x80\x80\x80", "\xA0\x80",
                                                 "\x90\x80\x80"};
  std::string candidate;
  for (auto ending : endings) {
    candidate.assign(prefix.data(), prefix.size());
    candidate.append(ending.data(), ending.size());
    if (candidate.size() <= 4 && utf8::is_valid(candidate.begin(), candidate.end())) return true;
  }
  return false;
}

}  // namespace

bool valid_utf8(std::string_view text) {
  return utf8::is_valid(text.begin(), text.end());
}

utf8_scan scan_utf8(std::string_view bytes) {
  // The first character is the shortest prefix that is well-formed: no shorter prefix of a
  // character is.
  const size_t longest = std::min<size_t>(bytes.size(), 4);
  for (size_t length = 1; length <= longest; ++length)
    if (utf8::is_valid(bytes.begin(), bytes.begin() + length)) return {utf8_kind::valid, length};
  // The maximal subpart: the longest prefix that could still be completed, at least one byte.
  size_t subpart = 0;
  while (subpart < std::min<size_t>(bytes.size(), 3) && completable(bytes.substr(0, subpart + 1)))
    ++subpart;
  if (subpart == bytes.size()) return {utf8_kind::incomplete, subpart};
  return {utf8_kind::invalid, std::max<size_t>(subpart, 1)};
}

std::string drain_utf8(std::string& pending, bool at_end) {
  std::string out;
  out.reserve(pending.size());
  size_t pos = 0;
  while (pos < pending.size()) {
    // The well-formed run, in one pass of utfcpp.
    const auto stop = utf8::find_invalid(pending.cbegin() + static_cast<std::ptrdiff_t>(pos),
                                         pending.cend());
    const auto good_end = static_cast<size_t>(stop - pending.cbegin());
    out.append(pending, pos, good_end - pos);
    pos = good_end;
    if (pos == pending.size()) break;
    const auto scan = scan_utf8(std::string_view{pending}.substr(pos));
    if (scan.kind == utf8_kind::incomplete && !at_end)
      break;  // an incomplete character: keep it until more bytes come
    out += replacement_character;
    pos += scan.length;
  }
  pending.erase(0, pos);
  return out;
}

}  // namespace conveyor::tokenizers
