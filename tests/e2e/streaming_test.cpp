// Streams of the real server arrive complete and in order when many run at once (a
// step's events are posted once and written with whatever else queued for the connection, as one
// chunk): each of 64 concurrent streamed clients gets exactly its whole (non-streamed) answer, its
// text chunks before one finish chunk, the usage chunk and one [DONE], over real sockets.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/e2e/conveyor_process.hpp"

namespace conveyor::e2e {
namespace {

using nlohmann::json;

json body_of(const std::string& prompt, int max_tokens, bool stream) {
  json b{{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  if (stream) {
    b["stream"] = true;
    b["stream_options"] = {{"include_usage", true}};
  }
  return b;
}

TEST(e2e_streaming, sixty_four_concurrent_streams_arrive_complete_and_in_order) {
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  const std::vector<std::string> prompts{"Once upon a time", "The cat sat", "Lily went to the park",
                                         "Tom had a big red ball"};
  const std::size_t clients = 64;
  auto prompt_of = [&](std::size_t i) { return prompts[i % prompts.size()]; };
  auto tokens_of = [](std::size_t i) { return 20 + int(i % 7) * 10; };

  // The whole answers, one at a time.
  std::vector<json> whole(clients);
  for (std::size_t i = 0; i < clients; ++i) {
    auto reply = server.request("POST", "/v1/completions",
                                body_of(prompt_of(i), tokens_of(i), false).dump());
    ASSERT_TRUE(reply);
    ASSERT_EQ(reply->status, 200u) << reply->body;
    whole[i] = reply->json();
  }

  // The same requests streamed, all at once, each on its own connection.
  std::vector<std::optional<http_reply>> streamed(clients);
  std::atomic<std::size_t> ready{0};
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < clients; ++i)
    threads.emplace_back([&, i] {
      test_client client{server.port()};
      ready.fetch_add(1);
      while (ready.load() < clients) std::this_thread::yield();
      if (!client.send_request("POST", "/v1/completions",
                               body_of(prompt_of(i), tokens_of(i), true).dump()))
        return;
      streamed[i] = client.read_response(std::chrono::seconds{60});
    });
  for (auto& t : threads) t.join();

  for (std::size_t i = 0; i < clients; ++i) {
    ASSERT_TRUE(streamed[i]) << "client " << i;
    ASSERT_EQ(streamed[i]->status, 200u) << streamed[i]->body;
    const auto events = sse_events(streamed[i]->body);
    ASSERT_GE(events.size(), 4u) << streamed[i]->body;
    // [DONE] once, last; the usage chunk before it; the one finish chunk before that.
    EXPECT_EQ(events.back(), "[DONE]") << "client " << i;
    for (std::size_t k = 0; k + 1 < events.size(); ++k)
      EXPECT_NE(events[k], "[DONE]") << "client " << i << " event " << k;
    const auto& usage = events[events.size() - 2];
    EXPECT_EQ(usage["choices"], json::array());
    EXPECT_EQ(usage["usage"], whole[i]["usage"]) << "client " << i;
    const auto& last = events[events.size() - 3];
    EXPECT_EQ(last["choices"][0]["text"], "");
    EXPECT_EQ(last["choices"][0]["finish_reason"], whole[i]["choices"][0]["finish_reason"]);
    for (std::size_t k = 0; k + 3 < events.size(); ++k) {
      EXPECT_EQ(events[k]["id"], last["id"]) << "client " << i << " event " << k;
      EXPECT_TRUE(events[k]["choices"][0]["finish_reason"].is_null())
          << "client " << i << " event " << k;
    }
    // The text chunks in order make the whole answer's text.
    EXPECT_EQ(stream_text(events), whole[i]["choices"][0]["text"]) << "client " << i;
  }

  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace conveyor::e2e
