// A blocking HTTP/1.1 client on Boost.Beast, every call bounded by a timeout: the one client of
// `conveyor bench --target` and of the tests. Responses may be Content-Length, chunked or
// close-delimited; a body can be read whole or handed over piece by piece as it arrives.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace conveyor::client {

/// One HTTP response as the client read it.
struct http_reply {
  /// Status code, e.g. 200.
  unsigned status = 0;
  /// Header fields with lower-case names (of a repeated field, the last).
  std::map<std::string, std::string> headers;
  /// The body, de-chunked (empty when it was handed to a body handler).
  std::string body;

  /// The header's value, or "" when absent.
  std::string header(const std::string& lower_name) const;
  /// The body as JSON (a discarded value when it is not JSON).
  nlohmann::json json() const;
};

/// Header fields of a request beyond Host, Content-Type and Content-Length, in order.
using header_fields = std::vector<std::pair<std::string, std::string>>;

/// Receives a response as it arrives: once with `bytes` empty when the head (status and headers
/// in `head`) has arrived, then with each piece of the body.
using body_handler = std::function<void(const http_reply& head, std::string_view bytes)>;

/// The bytes of one request: Host (`host_port`), Content-Type: application/json when it has a
/// body, Content-Length when it has a body or is a POST, then `fields`; `version` is 11 or 10.
/// What `http_connection::send_request` sends, for clients that write on their own sockets.
std::string format_request(const std::string& method, const std::string& target,
                           const std::string& host_port, const std::string& body = "",
                           const header_fields& fields = {}, unsigned version = 11);

/// How a connection is made.
struct connection_options {
  /// When > 0, the socket's receive buffer is shrunk to this many bytes first (a slow client).
  int receive_buffer = 0;
  /// How long resolving and connecting may take.
  std::chrono::milliseconds connect_timeout{10000};
};

/// One TCP connection to an HTTP server. Not thread-safe; one per thread.
class http_connection {
 public:
  /// Connects to `host`:`port`; `connected()` says whether it worked and `error()` why not.
  http_connection(const std::string& host, const std::string& port,
                  connection_options options = {});
  ~http_connection();
  http_connection(const http_connection&) = delete;
  http_connection& operator=(const http_connection&) = delete;

  /// True while the connection is open.
  bool connected() const;

  /// The last failure: of connecting, writing or reading ("" when none).
  const std::string& error() const { return error_; }

  /// Sends raw bytes, whatever they are (for tests of malformed or partial requests); false on
  /// error or when `timeout` passes first.
  bool send(std::string_view bytes, std::chrono::milliseconds timeout = std::chrono::seconds{10});

  /// Sends one request with Beast's serializer: Host, Content-Type: application/json when it has
  /// a body, Content-Length when it has a body or is a POST, then `fields`. `version` is 11 or 10.
  bool send_request(const std::string& method, const std::string& target,
                    const std::string& body = "", const header_fields& fields = {},
                    unsigned version = 11);

  /// Reads one whole response within `timeout`; nullopt (and `error()`) on timeout, on a
  /// malformed response, or when the connection ends first. With `on_body`, the body goes to it
  /// as it arrives instead of into the reply.
  std::optional<http_reply> read_response(
      std::chrono::milliseconds timeout = std::chrono::seconds{10},
      const body_handler& on_body = {});

  /// `send_request`, then `read_response`.
  std::optional<http_reply> request(const std::string& method, const std::string& target,
                                    const std::string& body = "", const header_fields& fields = {});

  /// Reads until the raw bytes received contain `needle`; false on timeout or end. The bytes
  /// stay for `read_response`.
  bool read_until(std::string_view needle,
                  std::chrono::milliseconds timeout = std::chrono::seconds{10});

  /// True when the server closes the connection within `timeout` (bytes before that are kept).
  bool wait_closed(std::chrono::milliseconds timeout = std::chrono::seconds{5});

  /// Raw bytes received and not yet consumed by `read_response`.
  const std::string& raw() const { return buffer_; }

  /// Closes the connection (a client going away).
  void close();

 private:
  struct socket_state;

  // Receives more bytes into buffer_; false on timeout, end or error.
  bool fill(std::chrono::steady_clock::time_point deadline);

  std::unique_ptr<socket_state> socket_;
  std::string host_;
  std::string port_;
  std::string error_;
  std::string buffer_;
  // The method of the last request sent: the response to HEAD has no body.
  std::string last_method_;
  bool eof_ = false;
};

}  // namespace conveyor::client
