// "HOST:PORT" addresses, as the configuration, the command line and the worker take them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace conveyor {

/// A host and a port.
struct host_port {
  std::string host;
  uint16_t port = 0;
};

/// Parses "HOST:PORT" (an IPv6 host in brackets: "[::1]:7001", returned without them). Nullopt
/// unless the host is not empty and the port is a number from `min_port` to 65535 (0 allows
/// "any free port" where a listener takes it).
std::optional<host_port> parse_host_port(std::string_view text, uint16_t min_port = 1);

}  // namespace conveyor
