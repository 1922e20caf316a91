// "HOST:PORT" addresses.
#include "common/host_port.hpp"

#include <charconv>

namespace conveyor {

std::optional<host_port> parse_host_port(std::string_view text, uint16_t min_port) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) return {};
  const auto digits = text.substr(colon + 1);
  if (digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string_view::npos)
    return {};
  unsigned value = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (value < min_port || value > 65535) return {};
  auto host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty()) return {};
  return host_port{std::string{host}, uint16_t(value)};
}

}  // namespace conveyor
