// The byte-level alphabet of GPT-2 (bytes_to_unicode in OpenAI's encoder.py).
#include "tokenizers/hf/byte_level.hpp"

#include <unordered_map>

#include "tokenizers/utf8.hpp"

namespace conveyor::tokenizers::hf {

namespace {

std::string encode_code_point(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

struct tables {
  std::array<std::string, 256> chars;
  std::unordered_map<std::string, uint8_t> bytes;
  tables() {
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      chars[b] = encode_code_point(printable ? b : next++);
      bytes.emplace(chars[b], static_cast<uint8_t>(b));
    }
  }
};

const tables& the_tables() {
  static const tables t;
  return t;
}

}  // namespace

const std::string& byte_to_char(uint8_t byte) {
  return the_tables().chars[byte];
}

bool chars_to_bytes(std::string_view token, std::string& out) {
  const auto& map = the_tables().bytes;
  out.clear();
  for (size_t pos = 0; pos < token.size();) {
    const auto scan = scan_utf8(token.substr(pos));
    if (scan.kind != utf8_kind::valid) return false;
    auto it = map.find(std::string{token.substr(pos, scan.length)});
    if (it == map.end()) return false;
    out += static_cast<char>(it->second);
    pos += scan.length;
  }
  return true;
}

std::string bytes_to_chars(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) out += byte_to_char(b);
  return out;
}

}  // namespace conveyor::tokenizers::hf
