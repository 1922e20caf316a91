// The backend's answers carried onto a connection's strand (server/event_poster.hpp), without
// sockets: steps posted from another thread run on the strand in order, a metrics reply reaches
// its handler, and nothing is posted once the server's gate closed or the connection is gone.
#include "server/event_poster.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

namespace conveyor::server::detail {

namespace {

// A connection as the poster sees it: it records what reached it.
class recording_target final : public event_target {
 public:
  explicit recording_target(net::any_io_executor ex) : executor_(std::move(ex)) {}

  const net::any_io_executor& executor() const override { return executor_; }

  void on_step(uint64_t serial, std::size_t index, completion_step step) override {
    heard.push_back(std::to_string(serial) + "/" + std::to_string(index) + ": " + step.text +
                    (step.end == completion_step::end_kind::finished ? " (finished)" : ""));
  }

  void on_metrics(uint64_t serial, std::string text) override {
    heard.push_back("metrics " + std::to_string(serial) + ": " + text);
  }

  std::vector<std::string> heard;

 private:
  net::any_io_executor executor_;
};

completion_step text_step(std::string text) {
  completion_step step;
  step.text = std::move(text);
  return step;
}

}  // namespace

TEST(server_event_poster, steps_from_another_thread_reach_the_target_on_its_strand_in_order) {
  net::io_context io;
  auto target = std::make_shared<recording_target>(io.get_executor());
  auto gate = std::make_shared<post_gate>();
  auto events = event_poster{gate, target}.choice_events(7, 1);
  std::thread backend{[&events] {
    for (int i = 0; i < 50; ++i) events.on_step(text_step(std::to_string(i)));
    completion_step end;
    end.end = completion_step::end_kind::finished;
    events.on_step(std::move(end));
  }};
  backend.join();
  EXPECT_TRUE(target->heard.empty()) << "nothing runs before the strand runs it";
  io.run();
  std::vector<std::string> expected;
  for (int i = 0; i < 50; ++i) expected.push_back("7/1: " + std::to_string(i));
  expected.push_back("7/1:  (finished)");
  EXPECT_EQ(target->heard, expected);
}

TEST(server_event_poster, a_metrics_reply_reaches_its_handler) {
  net::io_context io;
  auto target = std::make_shared<recording_target>(io.get_executor());
  auto reply = event_poster{std::make_shared<post_gate>(), target}.metrics_reply(3);
  reply("up 1\n");
  io.run();
  EXPECT_EQ(target->heard, std::vector<std::string>{"metrics 3: up 1\n"});
}

TEST(server_event_poster, a_posted_step_keeps_the_target_alive_until_it_ran) {
  net::io_context io;
  auto target = std::make_shared<recording_target>(io.get_executor());
  std::weak_ptr<recording_target> alive = target;
  auto events = event_poster{std::make_shared<post_gate>(), target}.choice_events(1, 0);
  events.on_step(text_step("a"));
  target.reset();
  EXPECT_FALSE(alive.expired());
  io.run();
  EXPECT_TRUE(alive.expired());
}

TEST(server_event_poster, nothing_is_posted_once_the_gate_closed_or_the_target_is_gone) {
  net::io_context io;
  auto target = std::make_shared<recording_target>(io.get_executor());
  auto gate = std::make_shared<post_gate>();
  const event_poster poster{gate, target};
  auto events = poster.choice_events(1, 0);
  gate->open = false;
  events.on_step(text_step("after the server stopped"));
  poster.metrics_reply(2)("after the server stopped");
  EXPECT_EQ(io.run(), 0u);
  EXPECT_TRUE(target->heard.empty());

  gate->open = true;
  target.reset();
  events.on_step(text_step("after the connection went away"));
  io.restart();
  EXPECT_EQ(io.run(), 0u);
}

}  // namespace conveyor::server::detail
