// UTF-8 classification and stream draining.
#include "model/utf8.hpp"

#include <cstdint>

namespace conveyor::model {

utf8_scan scan_utf8(std::string_view bytes) {
  const auto byte_at = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  const uint8_t lead = byte_at(0);
  if (lead < 0x80) return {utf8_kind::valid, 1};
  // Length of the sequence and the range of its second byte, from table 3-7.
  size_t length = 0;
  uint8_t low = 0x80;
  uint8_t high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead == 0xE0) {
    length = 3;
    low = 0xA0;
  } else if (lead == 0xED) {
    length = 3;
    high = 0x9F;
  } else if (lead >= 0xE1 && lead <= 0xEF) {
    length = 3;
  } else if (lead == 0xF0) {
    length = 4;
    low = 0x90;
  } else if (lead >= 0xF1 && lead <= 0xF3) {
    length = 4;
  } else if (lead == 0xF4) {
    length = 4;
    high = 0x8F;
  } else {
    return {utf8_kind::invalid, 1};
  }
  for (size_t i = 1; i < length; ++i) {
    if (i >= bytes.size()) return {utf8_kind::incomplete, bytes.size()};
    const uint8_t b = byte_at(i);
    if (b < low || b > high) return {utf8_kind::invalid, i};
    low = 0x80;
    high = 0xBF;
  }
  return {utf8_kind::valid, length};
}

std::string drain_utf8(std::string& pending, bool at_end) {
  std::string out;
  out.reserve(pending.size());
  size_t pos = 0;
  while (pos < pending.size()) {
    const auto scan = scan_utf8(std::string_view{pending}.substr(pos));
    if (scan.kind == utf8_kind::valid) {
      out.append(pending, pos, scan.length);
    } else if (scan.kind == utf8_kind::invalid || at_end) {
      out += replacement_character;
    } else {
      break;  // an incomplete character: keep it until more bytes come
    }
    pos += scan.length;
  }
  pending.erase(0, pos);
  return out;
}

}  // namespace conveyor::model
