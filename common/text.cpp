// Byte-string helpers: linear-time search, replacement, UTF-8 code points.
#include "common/text.hpp"

#include <algorithm>
#include <cstring>

namespace conveyor {

text_finder::text_finder(std::string_view needle) : needle_(needle), border_(needle.size() + 1) {
  border_[0] = -1;
  for (std::size_t i = 0; i < needle.size(); ++i) {
    auto k = border_[i];
    while (k >= 0 && needle[static_cast<std::size_t>(k)] != needle[i])
      k = border_[static_cast<std::size_t>(k)];
    border_[i + 1] = k + 1;
  }
}

std::size_t text_finder::find(std::string_view text, std::size_t from) const {
  if (needle_.empty()) return from <= text.size() ? from : std::string::npos;
  std::ptrdiff_t k = 0;
  for (std::size_t i = from; i < text.size(); ++i) {
    if (k == 0) {
      // Nothing matched yet: skip to the next byte that can start the needle.
      const void* next = std::memchr(text.data() + i, needle_[0], text.size() - i);
      if (next == nullptr) return std::string::npos;
      i = static_cast<std::size_t>(static_cast<const char*>(next) - text.data());
    }
    while (k >= 0 && needle_[static_cast<std::size_t>(k)] != text[i])
      k = border_[static_cast<std::size_t>(k)];
    if (static_cast<std::size_t>(++k) == needle_.size()) return i + 1 - needle_.size();
  }
  return std::string::npos;
}

bool replace_all(std::string& text, std::string_view from, std::string_view to,
                 replace_limits limits) {
  if (from.empty() || limits.max_count == 0) return text.size() <= limits.max_bytes;
  const text_finder finder{from};
  auto hit = finder.find(text, 0);
  if (hit == std::string::npos) return text.size() <= limits.max_bytes;
  std::string out;
  out.reserve(std::min(text.size() + text.size() / 4, limits.max_bytes));
  const auto append = [&](std::string_view piece) {
    if (piece.size() > limits.max_bytes - out.size()) return false;
    out += piece;
    return true;
  };
  const std::string_view all{text};
  std::size_t last = 0;
  for (std::size_t n = 0; hit != std::string::npos;) {
    if (!append(all.substr(last, hit - last)) || !append(to)) return false;
    last = hit + from.size();
    if (++n == limits.max_count) break;
    hit = finder.find(text, last);
  }
  if (!append(all.substr(last))) return false;
  text.swap(out);
  return true;
}

std::size_t utf8_code_points(std::string_view text) {
  std::size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace conveyor
