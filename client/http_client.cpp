// The HTTP/1.1 client: Asio operations run on a private io_context until they complete or their
// deadline passes (Beast's own stream timeouts close the socket, which a client that only wants
// to stop waiting cannot afford); responses are parsed from the bytes received by
// client/response_reader.hpp.
#include "client/http_client.hpp"

#include <sstream>

#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "client/response_reader.hpp"

namespace conveyor::client {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;

std::string http_reply::header(const std::string& lower_name) const {
  auto i = headers.find(lower_name);
  return i == headers.end() ? std::string{} : i->second;
}

nlohmann::json http_reply::json() const {
  return nlohmann::json::parse(body, nullptr, false);
}

struct http_connection::socket_state {
  asio::io_context io;
  tcp::socket socket{io};

  // Runs what was started on `io` until it completes (`done` turns true) or `deadline` passes;
  // then cancels it and lets its handler run, so that nothing is left pending. False on timeout.
  bool run_until(steady::time_point deadline, const bool& done) {
    io.restart();
    while (!done && !io.stopped() && steady::now() < deadline) io.run_one_until(deadline);
    if (done) return true;
    boost::system::error_code ignored;
    socket.cancel(ignored);
    io.restart();
    io.run();
    return false;
  }
};

http_connection::http_connection(const std::string& host, const std::string& port,
                                 connection_options options)
    : socket_(std::make_unique<socket_state>()), host_(host), port_(port) {
  const auto deadline = steady::now() + options.connect_timeout;
  boost::system::error_code ec;
  tcp::resolver resolver{socket_->io};
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec) {
    error_ = "cannot resolve " + host + ": " + ec.message();
    return;
  }
  for (const auto& entry : endpoints) {
    auto& s = socket_->socket;
    boost::system::error_code ignored;
    if (s.is_open()) s.close(ignored);
    s.open(entry.endpoint().protocol(), ec);
    if (ec) continue;
    if (options.receive_buffer > 0)
      s.set_option(asio::socket_base::receive_buffer_size{options.receive_buffer}, ignored);
    s.set_option(tcp::no_delay{true}, ignored);
    bool done = false;
    s.async_connect(entry.endpoint(), [&](boost::system::error_code e) {
      ec = e;
      done = true;
    });
    if (!socket_->run_until(deadline, done)) ec = asio::error::timed_out;
    if (!ec) {
      error_.clear();
      return;
    }
    error_ = "cannot connect to " + host + ":" + port + ": " + ec.message();
  }
  close();
}

http_connection::~http_connection() {
  close();
}

bool http_connection::connected() const {
  return socket_->socket.is_open();
}

void http_connection::close() {
  boost::system::error_code ignored;
  if (socket_->socket.is_open()) socket_->socket.close(ignored);
}

bool http_connection::send(std::string_view bytes, std::chrono::milliseconds timeout) {
  if (!connected()) return false;
  bool done = false;
  boost::system::error_code ec;
  asio::async_write(socket_->socket, asio::buffer(bytes.data(), bytes.size()),
                    [&](boost::system::error_code e, std::size_t) {
                      ec = e;
                      done = true;
                    });
  if (!socket_->run_until(steady::now() + timeout, done)) {
    error_ = "timed out writing";
    return false;
  }
  if (ec) error_ = "write: " + ec.message();
  return !ec;
}

std::string format_request(const std::string& method, const std::string& target,
                           const std::string& host_port, const std::string& body,
                           const header_fields& fields, unsigned version) {
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(version);
  req.set(http::field::host, host_port);
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : fields) req.insert(name, value);
  req.body() = body;
  req.prepare_payload();
  std::ostringstream out;
  out << req;
  return out.str();
}

bool http_connection::send_request(const std::string& method, const std::string& target,
                                   const std::string& body, const header_fields& fields,
                                   unsigned version) {
  if (!connected()) return false;
  const auto bytes = format_request(method, target, host_ + ":" + port_, body, fields, version);
  last_method_ = method;
  bool done = false;
  boost::system::error_code ec;
  asio::async_write(socket_->socket, asio::buffer(bytes), [&](boost::system::error_code e,
                                                              std::size_t) {
    ec = e;
    done = true;
  });
  if (!socket_->run_until(steady::now() + std::chrono::seconds{10}, done)) {
    error_ = "timed out writing the request";
    return false;
  }
  if (ec) error_ = "write: " + ec.message();
  return !ec;
}

bool http_connection::fill(steady::time_point deadline) {
  if (!connected() || eof_) return false;
  if (steady::now() >= deadline) {
    error_ = "timed out";
    return false;
  }
  char chunk[16384];
  bool done = false;
  std::size_t n = 0;
  boost::system::error_code ec;
  socket_->socket.async_read_some(asio::buffer(chunk), [&](boost::system::error_code e,
                                                           std::size_t k) {
    ec = e;
    n = k;
    done = true;
  });
  const bool in_time = socket_->run_until(deadline, done);
  // A read that completed just as it was cancelled keeps its bytes.
  buffer_.append(chunk, n);
  if (n > 0) return true;
  if (!in_time) {
    error_ = "timed out";
    return false;
  }
  if (ec) {
    eof_ = true;
    error_ = ec == asio::error::eof ? "the server closed the connection" : ec.message();
  }
  return false;
}

std::optional<http_reply> http_connection::read_response(std::chrono::milliseconds timeout,
                                                         const body_handler& on_body) {
  const auto deadline = steady::now() + timeout;
  response_reader reader{last_method_ == "HEAD", on_body};
  // buffer_ keeps what this response received until it is complete, so that a failed one can be
  // inspected through raw(); it starts with what the last response left.
  auto got = reader.feed(buffer_);
  for (;;) {
    if (got == response_reader::progress::more) {
      const std::size_t before = buffer_.size();
      if (fill(deadline)) {
        got = reader.feed(std::string_view{buffer_}.substr(before));
        continue;
      }
      if (!eof_) return std::nullopt;
      got = reader.end_of_stream();
    }
    if (got == response_reader::progress::failed) {
      error_ = reader.error();
      return std::nullopt;
    }
    buffer_ = reader.leftover();
    return std::move(reader.reply());
  }
}

std::optional<http_reply> http_connection::request(const std::string& method,
                                                   const std::string& target,
                                                   const std::string& body,
                                                   const header_fields& fields) {
  if (!send_request(method, target, body, fields)) return std::nullopt;
  return read_response();
}

bool http_connection::read_until(std::string_view needle, std::chrono::milliseconds timeout) {
  const auto deadline = steady::now() + timeout;
  while (buffer_.find(needle) == std::string::npos)
    if (!fill(deadline)) return false;
  return true;
}

bool http_connection::wait_closed(std::chrono::milliseconds timeout) {
  const auto deadline = steady::now() + timeout;
  while (fill(deadline)) {
  }
  return eof_;
}

}  // namespace conveyor::client
