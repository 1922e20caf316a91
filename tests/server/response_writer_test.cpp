// The connection's write queue (server/response_writer.hpp) over a real loopback socket: stream
// events queued while a write runs go out together in the next write, in order, as one chunk,
// and the stream's end follows them exactly once. The writer's count of started writes is the
// seam; the bytes the peer reads are the check.
#include "server/response_writer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>

namespace conveyor::server::detail {

namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

// A connected pair of loopback sockets on one io_context.
struct socket_pair {
  net::io_context io;
  tcp::socket server{io};
  tcp::socket client{io};

  socket_pair() {
    tcp::acceptor acceptor{io, tcp::endpoint{net::ip::make_address("127.0.0.1"), 0}};
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
  }

  // Everything the client can read until the server's side is shut down.
  std::string read_all() {
    error_code ignored;
    server.shutdown(tcp::socket::shutdown_send, ignored);
    std::string bytes;
    auto buf = net::dynamic_buffer(bytes);
    error_code ec;
    net::read(client, buf, ec);
    EXPECT_EQ(ec, net::error::eof);
    return bytes;
  }
};

std::string event(int i) {
  return "data: {\"n\":" + std::to_string(i) + "}\n\n";
}

// Flushes again after each write until everything queued is written, as the connection does;
// `between` runs once, after the first write started (while it is in flight).
struct driver {
  response_writer& writer;
  std::vector<error_code> results;

  void flush() {
    writer.flush([this](error_code ec) {
      results.push_back(ec);
      if (!ec) flush();
    });
  }
};

}  // namespace

TEST(server_response_writer, events_queued_during_a_write_go_out_in_one_write_in_order) {
  socket_pair p;
  response_writer writer{p.server};
  framing how;
  writer.queue_stream_head(how);
  writer.stream_buffer() += event(0);
  driver d{writer, {}};
  d.flush();  // the head is in flight
  EXPECT_TRUE(writer.writing());
  EXPECT_EQ(writer.writes_started(), 1u);
  // Forty events and the end, queued while the head is written: nothing starts meanwhile.
  std::string expected_data = event(0);
  for (int i = 1; i <= 40; ++i) {
    writer.stream_buffer() += event(i);
    expected_data += event(i);
    EXPECT_FALSE(writer.flush([](error_code) {}));
  }
  writer.queue_stream_end();
  EXPECT_EQ(writer.queued_stream_bytes(), expected_data.size());
  p.io.run();
  // The head, then one write with every event and the end.
  EXPECT_EQ(writer.writes_started(), 2u);
  ASSERT_EQ(d.results.size(), 2u);
  EXPECT_FALSE(d.results[0]);
  EXPECT_FALSE(d.results[1]);
  EXPECT_TRUE(writer.idle());
  auto bytes = p.read_all();
  auto body_at = bytes.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos);
  auto head = bytes.substr(0, body_at + 4);
  EXPECT_NE(head.find("Transfer-Encoding: chunked"), std::string::npos) << head;
  EXPECT_NE(head.find("Content-Type: text/event-stream"), std::string::npos) << head;
  char size_line[32];
  std::snprintf(size_line, sizeof(size_line), "%zx\r\n", expected_data.size());
  // One chunk with all forty-one events in order, then the last chunk once.
  EXPECT_EQ(bytes.substr(body_at + 4), size_line + expected_data + "\r\n" + "0\r\n\r\n");
}

TEST(server_response_writer, each_write_gathers_what_came_while_the_previous_ran) {
  socket_pair p;
  response_writer writer{p.server};
  framing how;
  how.http10 = true;  // close-delimited: the body is the events' bytes as they are
  how.keep_alive = false;
  writer.queue_stream_head(how);
  driver d{writer, {}};
  d.flush();
  p.io.run();  // the head alone
  p.io.restart();
  EXPECT_EQ(writer.writes_started(), 1u);
  std::string expected;
  // Three rounds: the first event starts a write, the next nine wait for it and go out together.
  for (int round = 0; round < 3; ++round) {
    writer.stream_buffer() += event(round * 10);
    expected += event(round * 10);
    d.flush();
    for (int i = 1; i < 10; ++i) {
      writer.stream_buffer() += event(round * 10 + i);
      expected += event(round * 10 + i);
      d.flush();  // a write runs: this starts nothing
    }
    p.io.run();
    p.io.restart();
  }
  // Per round: one write for the first event and one for the nine queued behind it.
  EXPECT_EQ(writer.writes_started(), 1u + 3u * 2u);
  writer.queue_stream_end();
  d.flush();
  p.io.run();
  EXPECT_TRUE(writer.idle());
  auto bytes = p.read_all();
  auto body_at = bytes.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos);
  EXPECT_EQ(bytes.find("chunked"), std::string::npos);
  EXPECT_EQ(bytes.substr(body_at + 4), expected);
}

TEST(server_response_writer, held_stream_data_waits_for_its_release_or_the_end) {
  socket_pair p;
  response_writer writer{p.server};
  writer.hold_stream_until_released(true);
  framing how;
  how.http10 = true;  // close-delimited: the body is the events' bytes as they are
  how.keep_alive = false;
  writer.queue_stream_head(how);
  writer.stream_buffer() += event(0);
  driver d{writer, {}};
  d.flush();
  p.io.run();  // the head goes (a message is always due); the held event stays
  p.io.restart();
  EXPECT_EQ(writer.writes_started(), 1u);
  EXPECT_EQ(writer.queued_stream_bytes(), event(0).size());
  EXPECT_FALSE(writer.flush([](error_code) {}));
  // Released: one write with both events queued by then.
  writer.stream_buffer() += event(1);
  writer.release_stream();
  d.flush();
  // Queued while that write runs, after the release: it waits for the next release.
  writer.stream_buffer() += event(2);
  p.io.run();
  p.io.restart();
  EXPECT_EQ(writer.writes_started(), 2u);
  EXPECT_EQ(writer.queued_stream_bytes(), event(2).size());
  // The end takes the held event along without a release.
  writer.queue_stream_end();
  d.flush();
  p.io.run();
  EXPECT_EQ(writer.writes_started(), 3u);
  EXPECT_TRUE(writer.idle());
  auto bytes = p.read_all();
  auto body_at = bytes.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos);
  EXPECT_EQ(bytes.substr(body_at + 4), event(0) + event(1) + event(2));
}

TEST(server_response_writer, a_whole_response_waits_for_the_write_before_it) {
  socket_pair p;
  response_writer writer{p.server};
  framing how;
  writer.queue_continue();
  writer.queue_response(make_response(200, "application/json", "{\"ok\":true}", how));
  driver d{writer, {}};
  d.flush();
  p.io.run();
  EXPECT_EQ(writer.writes_started(), 2u);
  auto bytes = p.read_all();
  EXPECT_EQ(bytes.rfind("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", 0), 0u) << bytes;
  EXPECT_EQ(bytes.substr(bytes.size() - 11), "{\"ok\":true}");
}

}  // namespace conveyor::server::detail
