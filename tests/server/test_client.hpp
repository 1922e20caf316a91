// The tests' HTTP client: the shared Beast client of client/ on 127.0.0.1, and the events of a
// streamed body through the shared SSE parser.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/http_client.hpp"

namespace conveyor::server::test {

using client::header_fields;
using client::http_reply;

/// One TCP connection to 127.0.0.1. Raw bytes (`send`) are for the tests of malformed, partial
/// and pipelined requests; everything else goes through Beast.
class test_client : public client::http_connection {
 public:
  /// Connects to `port`; `rcvbuf` > 0 shrinks the receive buffer first (to play a slow client).
  explicit test_client(uint16_t port, int rcvbuf = 0);
};

/// The `data:` payloads of a server-sent event stream: JSON events parsed, "[DONE]" as a string.
std::vector<nlohmann::json> sse_events(const std::string& body);

/// Runs a shell command and returns what it wrote to stdout.
std::string run_command(const std::string& command);

}  // namespace conveyor::server::test
