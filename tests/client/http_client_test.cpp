// The shared HTTP client against a scripted server on a real socket: what it sends, the three
// ways a response body ends, bodies handed over as they arrive, and timeouts that leave the
// connection usable.
#include "client/http_client.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

namespace {

using namespace conveyor::client;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// Accepts one connection on 127.0.0.1 and runs `script` on it in a thread.
class scripted_server {
 public:
  using script = std::function<void(tcp::socket&)>;

  explicit scripted_server(script s) : acceptor_(io_, {asio::ip::address_v4::loopback(), 0}) {
    thread_ = std::thread([this, s = std::move(s)] {
      tcp::socket socket{io_};
      acceptor_.accept(socket);
      s(socket);
    });
  }
  ~scripted_server() { thread_.join(); }

  std::string port() const { return std::to_string(acceptor_.local_endpoint().port()); }

  // Reads one request head and its Content-Length body; returns them as received.
  static std::string read_request(tcp::socket& socket) {
    asio::streambuf in;
    const auto head_size = asio::read_until(socket, in, "\r\n\r\n");
    std::string text{asio::buffers_begin(in.data()), asio::buffers_end(in.data())};
    const auto cl = text.find("Content-Length: ");
    const std::size_t length = cl == std::string::npos ? 0 : std::stoul(text.substr(cl + 16));
    while (text.size() < head_size + length) {
      char c[256];
      text.append(c, socket.read_some(asio::buffer(c)));
    }
    return text;
  }

  static void write(tcp::socket& socket, const std::string& bytes) {
    asio::write(socket, asio::buffer(bytes));
  }

 private:
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
};

}  // namespace

TEST(http_client, sends_requests_through_beast) {
  std::promise<std::vector<std::string>> received;
  scripted_server server{[&](tcp::socket& s) {
    std::vector<std::string> requests;
    for (int i = 0; i < 3; ++i) {
      requests.push_back(scripted_server::read_request(s));
      scripted_server::write(s, "HTTP/1.1 204 No Content\r\n\r\n");
    }
    received.set_value(requests);
  }};
  http_connection c{"127.0.0.1", server.port()};
  ASSERT_TRUE(c.connected()) << c.error();
  auto a = c.request("POST", "/v1/completions", R"({"a":1})", {{"X-Test", "yes"}});
  ASSERT_TRUE(a) << c.error();
  EXPECT_EQ(a->status, 204u);
  ASSERT_TRUE(c.request("GET", "/health"));
  ASSERT_TRUE(c.send_request("POST", "/empty", "", {}, 10));
  ASSERT_TRUE(c.read_response());
  const auto requests = received.get_future().get();
  const std::string host = "Host: 127.0.0.1:" + server.port() + "\r\n";
  EXPECT_EQ(requests[0].rfind("POST /v1/completions HTTP/1.1\r\n", 0), 0u) << requests[0];
  EXPECT_NE(requests[0].find(host), std::string::npos) << requests[0];
  EXPECT_NE(requests[0].find("Content-Type: application/json\r\n"), std::string::npos);
  EXPECT_NE(requests[0].find("Content-Length: 7\r\n"), std::string::npos);
  EXPECT_NE(requests[0].find("X-Test: yes\r\n"), std::string::npos);
  EXPECT_EQ(requests[0].substr(requests[0].size() - 7), R"({"a":1})");
  EXPECT_EQ(requests[1].rfind("GET /health HTTP/1.1\r\n", 0), 0u) << requests[1];
  EXPECT_EQ(requests[1].find("Content-Length"), std::string::npos) << requests[1];
  EXPECT_EQ(requests[2].rfind("POST /empty HTTP/1.0\r\n", 0), 0u) << requests[2];
  EXPECT_NE(requests[2].find("Content-Length: 0\r\n"), std::string::npos) << requests[2];
}

TEST(http_client, reads_bodies_of_every_framing) {
  scripted_server server{[](tcp::socket& s) {
    scripted_server::read_request(s);
    scripted_server::write(s, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-One: 1\r\n\r\nhello");
    scripted_server::read_request(s);
    scripted_server::write(s, "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    scripted_server::write(s, "2\r\nde\r\n0\r\n\r\n");
    scripted_server::read_request(s);
    scripted_server::write(s, "HTTP/1.0 200 OK\r\n\r\nuntil the end");
  }};
  http_connection c{"127.0.0.1", server.port()};
  auto a = c.request("GET", "/a");
  ASSERT_TRUE(a) << c.error();
  EXPECT_EQ(a->body, "hello");
  EXPECT_EQ(a->header("x-one"), "1");
  auto b = c.request("GET", "/b");
  ASSERT_TRUE(b) << c.error();
  EXPECT_EQ(b->status, 201u);
  EXPECT_EQ(b->body, "abcde");
  auto d = c.request("GET", "/c");
  ASSERT_TRUE(d) << c.error();
  EXPECT_EQ(d->body, "until the end");
  EXPECT_TRUE(c.raw().empty());
}

TEST(http_client, hands_the_body_over_as_it_arrives) {
  std::promise<void> first_seen;
  scripted_server server{[&](tcp::socket& s) {
    scripted_server::read_request(s);
    scripted_server::write(s, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst \r\n");
    // The second piece only once the client has the first: handed over, not held to the end.
    first_seen.get_future().wait();
    scripted_server::write(s, "6\r\nsecond\r\n0\r\n\r\n");
  }};
  http_connection c{"127.0.0.1", server.port()};
  ASSERT_TRUE(c.send_request("POST", "/stream", "{}"));
  std::vector<std::string> pieces;
  unsigned head_status = 0;
  auto reply = c.read_response(10s, [&](const http_reply& head, std::string_view bytes) {
    if (bytes.empty()) {
      head_status = head.status;
      return;
    }
    pieces.emplace_back(bytes);
    if (pieces.size() == 1) first_seen.set_value();
  });
  ASSERT_TRUE(reply) << c.error();
  EXPECT_EQ(head_status, 200u);
  EXPECT_EQ(pieces, (std::vector<std::string>{"first ", "second"}));
  EXPECT_TRUE(reply->body.empty());
}

TEST(http_client, a_timeout_leaves_the_connection_usable) {
  std::promise<void> go;
  scripted_server server{[&](tcp::socket& s) {
    scripted_server::read_request(s);
    go.get_future().wait();
    scripted_server::write(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  }};
  http_connection c{"127.0.0.1", server.port()};
  ASSERT_TRUE(c.send_request("GET", "/slow"));
  // The server answers only after this read gave up.
  EXPECT_FALSE(c.read_until("HTTP/1.1", 20ms));
  EXPECT_FALSE(c.read_response(20ms));
  EXPECT_EQ(c.error(), "timed out");
  go.set_value();
  auto reply = c.read_response();
  ASSERT_TRUE(reply) << c.error();
  EXPECT_EQ(reply->body, "ok");
}

TEST(http_client, a_cut_response_and_a_closed_port_are_errors) {
  scripted_server server{[](tcp::socket& s) {
    scripted_server::read_request(s);
    scripted_server::write(s, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort");
  }};
  http_connection c{"127.0.0.1", server.port()};
  EXPECT_FALSE(c.request("GET", "/"));
  EXPECT_EQ(c.error(), "the server closed the connection");
  EXPECT_EQ(c.raw().substr(c.raw().size() - 5), "short");  // kept for inspection
  EXPECT_TRUE(c.wait_closed());

  // A port nobody listens on: the one of a listener closed at once.
  std::string closed_port;
  {
    asio::io_context io;
    tcp::acceptor a{io, {asio::ip::address_v4::loopback(), 0}};
    closed_port = std::to_string(a.local_endpoint().port());
  }
  http_connection refused{"127.0.0.1", closed_port};
  EXPECT_FALSE(refused.connected());
  EXPECT_NE(refused.error().find("cannot connect"), std::string::npos) << refused.error();
}
