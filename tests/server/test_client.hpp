// A small blocking HTTP/1.1 client on a raw POSIX socket for the server tests: every read has a
// deadline, responses may be Content-Length, chunked or close-delimited.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace conveyor::server::test {

/// One HTTP response as the client read it.
struct http_reply {
  /// Status code, e.g. 200.
  unsigned status = 0;
  /// Header fields with lower-case names.
  std::map<std::string, std::string> headers;
  /// The body, de-chunked.
  std::string body;

  /// The header's value, or "" when absent.
  std::string header(const std::string& lower_name) const;
  /// The body as JSON (a discarded value when it is not JSON).
  nlohmann::json json() const;
};

/// One TCP connection to 127.0.0.1.
class test_client {
 public:
  /// Connects to `port`; `rcvbuf` > 0 shrinks the receive buffer first (to play a slow client).
  explicit test_client(uint16_t port, int rcvbuf = 0);
  ~test_client();
  test_client(const test_client&) = delete;
  test_client& operator=(const test_client&) = delete;

  /// True when connected.
  bool connected() const { return fd_ >= 0; }

  /// Sends raw bytes; false on error.
  bool send(std::string_view bytes);

  /// Sends one request with Content-Length (and Content-Type: application/json when it has a
  /// body); `extra` holds more header lines, each ending in "\r\n".
  bool send_request(const std::string& method, const std::string& target,
                    const std::string& body = "", const std::string& extra = "",
                    const std::string& version = "HTTP/1.1");

  /// Reads one whole response; nullopt on timeout or when the connection ends first.
  std::optional<http_reply> read_response(std::chrono::milliseconds timeout = std::chrono::seconds{
                                              10});

  /// `send_request`, then `read_response`.
  std::optional<http_reply> request(const std::string& method, const std::string& target,
                                    const std::string& body = "", const std::string& extra = "");

  /// Reads until the raw bytes received contain `needle`; false on timeout or end.
  bool read_until(std::string_view needle,
                  std::chrono::milliseconds timeout = std::chrono::seconds{10});

  /// True when the server closes the connection within `timeout` (bytes before that are kept).
  bool wait_closed(std::chrono::milliseconds timeout = std::chrono::seconds{5});

  /// Raw bytes received and not yet consumed by `read_response`.
  const std::string& raw() const { return buf_; }

  /// Closes the connection (a client going away).
  void close();

 private:
  // Receives more bytes; false on timeout, end or error.
  bool fill(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  bool eof_ = false;
  std::string buf_;
};

/// The `data:` payloads of a server-sent event stream: JSON events parsed, "[DONE]" as a string.
std::vector<nlohmann::json> sse_events(const std::string& body);

/// Runs a shell command and returns what it wrote to stdout.
std::string run_command(const std::string& command);

}  // namespace conveyor::server::test
