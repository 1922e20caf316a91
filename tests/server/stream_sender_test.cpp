// A connection's stream sender (server/stream_sender.hpp) without a peer: when the events that a
// task rendered go out (the flushes it asks for), its timer writing a fast stream's waiting
// events at their deadline, the stream's head once per response, and the unsent limit. The
// flush handler counts instead of writing.
#include "server/stream_sender.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

namespace conveyor::server::detail {

namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;

// A sender on an unconnected socket's writer: nothing is written, flushes are counted. Its
// delay is long enough that an event right after another always comes within half of it.
struct sender_fixture {
  net::io_context io;
  net::ip::tcp::socket socket{io};
  response_writer writer{socket};
  int flushes = 0;
  // Stands for the connection, which the timer keeps alive while it waits.
  std::shared_ptr<int> owner = std::make_shared<int>(0);
  stream_sender sender;

  explicit sender_fixture(std::size_t max_events = 16, std::chrono::milliseconds max_delay = 300ms,
                          std::size_t max_unsent_bytes = 1 << 20)
      : sender(
            writer, io.get_executor(), max_events, max_delay, max_unsent_bytes,
            [this] { ++flushes; }, [this] { return std::shared_ptr<void>{owner}; }) {}

  // Renders one event and hands it to the sender.
  void event(bool opens_choice = false) {
    sender.buffer() += "data: {}\n\n";
    sender.send(1, opens_choice);
  }
};

}  // namespace

TEST(server_stream_sender, a_choices_first_event_goes_out_at_once_a_fast_streams_next_waits) {
  sender_fixture f;
  framing how;
  ASSERT_TRUE(f.sender.start(how));
  f.event(true);
  EXPECT_EQ(f.flushes, 1) << "a choice's first event (its time to first token) never waits";
  f.event();
  EXPECT_EQ(f.flushes, 1) << "an event right after the one before waits";
  EXPECT_EQ(f.owner.use_count(), 2) << "the timer keeps the connection while it waits";
  f.io.run();  // the timer, at the waiting event's deadline
  EXPECT_EQ(f.flushes, 2);
  EXPECT_EQ(f.owner.use_count(), 1);
}

TEST(server_stream_sender, nothing_is_sent_by_the_timer_after_the_end_or_a_close) {
  {
    sender_fixture f;
    framing how;
    f.sender.start(how);
    f.event(true);
    f.event();
    f.sender.end();  // the end goes out with what waits: the caller flushes
    f.io.run();
    EXPECT_EQ(f.flushes, 1) << "the timer found nothing waiting";
  }
  {
    sender_fixture f;
    framing how;
    f.sender.start(how);
    f.event(true);
    f.event();
    f.sender.close();
    f.io.run();
    EXPECT_EQ(f.flushes, 1);
    EXPECT_EQ(f.owner.use_count(), 1) << "the stopped timer let the connection go";
  }
}

TEST(server_stream_sender, without_a_delay_every_event_goes_out_at_once) {
  sender_fixture f{16, 0ms};
  framing how;
  f.sender.start(how);
  for (int i = 0; i < 5; ++i) f.event();
  EXPECT_EQ(f.flushes, 5);
  EXPECT_EQ(f.io.run(), 0u) << "no timer";
}

TEST(server_stream_sender, the_head_is_queued_once_per_response) {
  sender_fixture f;
  framing how;
  EXPECT_FALSE(f.sender.started());
  EXPECT_TRUE(f.sender.start(how));
  EXPECT_TRUE(f.sender.started());
  EXPECT_FALSE(f.sender.start(how)) << "already queued";
  EXPECT_TRUE(how.keep_alive);
  f.sender.reset();
  EXPECT_FALSE(f.sender.started());
  framing http10{true, true};
  EXPECT_TRUE(f.sender.start(http10));
  EXPECT_FALSE(http10.keep_alive) << "an HTTP/1.0 stream ends with the connection";
}

TEST(server_stream_sender, more_than_the_limit_unsent_is_too_much) {
  sender_fixture f{16, 300ms, 20};
  framing how;
  f.sender.start(how);
  f.sender.buffer() += "data: {}\n\n";  // 10 bytes
  EXPECT_FALSE(f.sender.too_much_unsent());
  f.sender.buffer() += "data: {}\n\n";  // 20: at the limit
  EXPECT_FALSE(f.sender.too_much_unsent());
  f.sender.buffer() += "x";
  EXPECT_TRUE(f.sender.too_much_unsent());
}

}  // namespace conveyor::server::detail
