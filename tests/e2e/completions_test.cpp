// The real server gives the stories260K reference text, whole and streamed, and the same answer
// to each of 64 concurrent clients as to that client alone.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <thread>

#include "tests/e2e/conveyor_process.hpp"

namespace conveyor::e2e {
namespace {

using nlohmann::json;

TEST(e2e_completions, expected_text_whole_and_streamed) {
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  const auto expected = expected_once_upon_a_time();

  auto whole = server.request("POST", "/v1/completions",
                              R"({"prompt": "Once upon a time", "max_tokens": 60,
                                  "temperature": 0})");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200u) << whole->body;
  EXPECT_EQ(whole->header("content-type"), "application/json");
  const auto body = whole->json();
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "stories260K");
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["text"], expected);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"], (json{{"prompt_tokens", 5},
                                 {"completion_tokens", 60},
                                 {"total_tokens", 65},
                                 {"prompt_tokens_details", {{"cached_tokens", 0}}}}));

  auto streamed = server.request("POST", "/v1/completions",
                                 R"({"prompt": "Once upon a time", "max_tokens": 60,
                                     "temperature": 0, "stream": true,
                                     "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200u) << streamed->body;
  EXPECT_EQ(streamed->header("content-type").rfind("text/event-stream", 0), 0u);
  const auto events = sse_events(streamed->body);
  // Text chunks, then the chunk with finish_reason, the usage chunk and [DONE].
  ASSERT_GE(events.size(), 4u) << streamed->body;
  EXPECT_EQ(events.back(), "[DONE]");
  const auto& usage_chunk = events[events.size() - 2];
  EXPECT_EQ(usage_chunk["choices"], json::array());
  EXPECT_EQ(usage_chunk["usage"], body["usage"]);
  const auto& last = events[events.size() - 3];
  EXPECT_EQ(last["choices"][0]["text"], "");
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  for (std::size_t i = 0; i + 3 < events.size(); ++i) {
    EXPECT_EQ(events[i]["id"], last["id"]) << i;
    EXPECT_TRUE(events[i]["choices"][0]["finish_reason"].is_null()) << i;
  }
  EXPECT_EQ(stream_text(events), expected);
  EXPECT_EQ(stream_text(events), body["choices"][0]["text"]);

  // An empty prompt is BOS alone; its text is what run.c prints, without a leading space.
  std::ifstream file{CONVEYOR_SOURCE_DIR "/models/stories260K/expected/greedy_empty_prompt_n64.txt",
                     std::ios::binary};
  std::string run_c{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  ASSERT_EQ(run_c.rfind("Once upon a time", 0), 0u);
  run_c.pop_back();  // run.c's final newline
  auto empty = server.request("POST", "/v1/completions",
                              R"({"prompt": "", "max_tokens": 64, "temperature": 0})");
  ASSERT_TRUE(empty);
  ASSERT_EQ(empty->status, 200u) << empty->body;
  EXPECT_EQ(empty->json()["choices"][0]["text"], run_c);

  EXPECT_EQ(server.stop(), 0) << server.log();
}

// One client's request: prompt `p` of the list with its own max_tokens.
struct client_case {
  std::string prompt;
  int max_tokens;
  std::string body() const {
    return json{{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}}.dump();
  }
};

// What a client compares: the choice and the usage (not id nor created).
json answer_of(const std::optional<http_reply>& reply) {
  if (!reply) return "no reply";
  auto body = reply->json();
  if (reply->status != 200 || !body.is_object()) return reply->body;
  return json{{"choices", body["choices"]}, {"usage", body["usage"]}};
}

TEST(e2e_completions, sixty_four_concurrent_clients_get_their_solo_answers) {
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  const std::vector<std::string> prompts{"Once upon a time",       "The cat sat",
                                         "Lily went to the park",  "Tom had a big red ball",
                                         "One day, a little bird", "The sun was shining",
                                         "Sam and his dog",        "There was a girl who"};
  std::vector<client_case> cases;
  for (int j = 0; j < 8; ++j)
    for (const auto& p : prompts) cases.push_back({p, 8 + 4 * j + int(cases.size() % 3)});
  ASSERT_EQ(cases.size(), 64u);

  // Alone: one request at a time on one keep-alive connection.
  std::vector<json> solo;
  {
    test_client client{server.port()};
    ASSERT_TRUE(client.connected());
    for (const auto& c : cases) {
      solo.push_back(answer_of(client.request("POST", "/v1/completions", c.body())));
      ASSERT_TRUE(solo.back().is_object()) << c.body() << ": " << solo.back();
      ASSERT_EQ(solo.back()["choices"][0]["text"].get<std::string>().empty(), false);
    }
  }

  // Together: 64 threads, each on its own connection, released at once.
  std::vector<json> together(cases.size());
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < cases.size(); ++i)
    threads.emplace_back([&, i] {
      test_client client{server.port()};
      ready.fetch_add(1);
      while (ready.load() < int(cases.size())) std::this_thread::yield();
      if (!client.send_request("POST", "/v1/completions", cases[i].body())) return;
      together[i] = answer_of(client.read_response(std::chrono::seconds{60}));
    });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(together[i], solo[i]) << "client " << i << ": " << cases[i].body();

  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace conveyor::e2e
