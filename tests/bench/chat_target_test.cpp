// Chat workloads through --target: each turn's messages, and conversations replayed against a
// canned server on a real socket whose every reply is new ("Reply #N"), so that turn k + 1 can
// only carry turn k's reply if the client read it from the stream.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/chat_target.hpp"
#include "tests/bench/canned_server.hpp"

using namespace conveyor::bench;
using conveyor::bench::test::canned_server;
using nlohmann::json;

namespace {

conversation conversation_of(const std::string& id, std::vector<std::string> users,
                             const std::string& system = "Be kind.") {
  conversation c;
  c.id = id;
  c.system_prompt = system;
  c.user_messages = std::move(users);
  c.max_tokens = 5;
  return c;
}

target_options options_of(const canned_server& server) {
  target_options o;
  o.url = *parse_target_url(server.url());
  return o;
}

}  // namespace

TEST(bench_chat_target, turn_messages_carry_the_conversation_so_far) {
  const auto c = conversation_of("c", {"U1.", "U2.", "U3."});
  EXPECT_EQ(turn_messages(c, {}), json::parse(R"([{"role":"system","content":"Be kind."},
                                                  {"role":"user","content":"U1."}])"));
  EXPECT_EQ(turn_messages(c, {"R1", "R2"}), json::parse(R"([{"role":"system","content":"Be kind."},
                            {"role":"user","content":"U1."},
                            {"role":"assistant","content":"R1"},
                            {"role":"user","content":"U2."},
                            {"role":"assistant","content":"R2"},
                            {"role":"user","content":"U3."}])"));
  // No system prompt, no system message.
  EXPECT_EQ(turn_messages(conversation_of("c", {"U1."}, ""), {}),
            json::parse(R"([{"role":"user","content":"U1."}])"));
}

TEST(bench_chat_target, the_body_streams_with_usage_and_the_run_s_fields) {
  target_options o;
  o.model = "m1";
  o.sampling.temperature = 0;
  o.sampling.ignore_eos = true;
  auto body = json::parse(chat_request_body(conversation_of("c", {"U1.", "U2."}), {"R1"}, o));
  EXPECT_EQ(body.at("messages").size(), 4u);
  EXPECT_EQ(body.at("max_tokens"), json(5));
  EXPECT_EQ(body.at("stream"), json(true));
  EXPECT_EQ(body.at("stream_options"), json({{"include_usage", true}}));
  EXPECT_EQ(body.at("model"), json("m1"));
  EXPECT_EQ(body.at("temperature"), json(0.0));
  EXPECT_EQ(body.at("ignore_eos"), json(true));
}

TEST(bench_chat_target, parses_chat_chunks_and_cached_tokens) {
  auto role = parse_stream_event(
      R"({"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null}]})");
  EXPECT_EQ(role.text, "");
  auto piece = parse_stream_event(R"({"choices":[{"delta":{"content":" Sam"}}]})");
  EXPECT_EQ(piece.text, " Sam");
  auto usage =
      parse_stream_event(R"({"choices":[],"usage":{"completion_tokens":3,"prompt_tokens":90,)"
                         R"("prompt_tokens_details":{"cached_tokens":64}}})");
  EXPECT_EQ(usage.completion_tokens, 3);
  EXPECT_EQ(usage.prompt_tokens, 90);
  EXPECT_EQ(usage.cached_tokens, 64);
  auto bare = parse_stream_event(R"({"choices":[],"usage":{"completion_tokens":3}})");
  EXPECT_FALSE(bare.prompt_tokens);
  EXPECT_FALSE(bare.cached_tokens);

  completion_stream s;
  s.on_data(R"({"choices":[{"delta":{"content":"","role":"assistant"}}]})", 0.05);
  s.on_data(R"({"choices":[{"delta":{"content":"Hi"}}]})", 0.1);
  s.on_data(R"({"choices":[{"delta":{"content":" there"}}]})", 0.2);
  s.on_data(R"({"choices":[{"delta":{},"finish_reason":"stop"}]})", 0.21);
  s.on_data(R"({"choices":[],"usage":{"completion_tokens":2,"prompt_tokens":9}})", 0.22);
  s.on_data("[DONE]", 0.22);
  auto r = s.finish(200, "", 0.25);
  EXPECT_EQ(r.status, request_status::completed);
  EXPECT_EQ(r.text, "Hi there");
  EXPECT_EQ(r.chunk_times, (std::vector<double>{0.1, 0.2}));  // the role chunk is no token
  EXPECT_EQ(r.prompt_tokens, 9);
  EXPECT_FALSE(r.cached_tokens) << "not reported";
}

TEST(bench_chat_target, each_turn_sends_the_replies_the_server_gave_before_it) {
  canned_server server;
  chat_workload w;
  for (int i = 0; i < 5; ++i) {
    const auto n = std::to_string(i);
    w.push_back(
        conversation_of("c" + n, {"C" + n + " one.", "C" + n + " two.", "C" + n + " three."}));
    w.back().arrival_s = 0.01 * i;
  }
  run_progress progress;
  run_timing timing;
  auto records = run_chat_target(w, options_of(server), 0, progress, timing);
  ASSERT_EQ(records.size(), 15u);
  EXPECT_EQ(progress.sent.load(), 15u);
  EXPECT_EQ(progress.ended.load(), 15u);
  // Records: conversation by conversation, turns 1, 2, 3.
  for (std::size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].status, request_status::completed) << records[i].message;
    EXPECT_EQ(records[i].turn, int32_t(i % 3 + 1));
    EXPECT_EQ(records[i].text.rfind("Reply #", 0), 0u) << records[i].text;
  }
  // Which body was which turn: its last user message says; its place N gave reply "Reply #N".
  const auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 15u);
  std::map<std::string, std::size_t> place_of;  // last user message -> place
  for (std::size_t n = 0; n < bodies.size(); ++n)
    place_of[json::parse(bodies[n]).at("messages").back().at("content")] = n;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const auto& users = w[i].user_messages;
    std::vector<std::string> replies;
    for (std::size_t k = 0; k < users.size(); ++k) {
      ASSERT_TRUE(place_of.count(users[k])) << users[k];
      const auto sent = json::parse(bodies[place_of[users[k]]]);
      // The conversation so far, with the replies the server gave to this conversation's turns.
      EXPECT_EQ(sent.at("messages"), turn_messages(w[i], replies)) << sent.dump();
      EXPECT_EQ(sent.at("stream"), json(true));
      const std::string reply = "Reply #" + std::to_string(place_of[users[k]]);
      EXPECT_EQ(records[i * 3 + k].text, reply);
      replies.push_back(reply);
      // Turn k + 1 left after turn k's reply came back.
      if (k > 0) {
        EXPECT_GT(place_of[users[k]], place_of[users[k - 1]]);
      }
    }
  }
  auto s = summarize("target", 100, records, timing.wall_s);
  EXPECT_EQ(s.completed, 15u);
  ASSERT_EQ(s.ttft_by_turn.size(), 3u);
  for (const auto& d : s.ttft_by_turn) EXPECT_EQ(d.count, 5u);
  EXPECT_EQ(s.ttft_later_turns.count, 10u);
  EXPECT_EQ(s.prompt_tokens, 1500u);
  EXPECT_EQ(s.cached_tokens, 600u);
  EXPECT_DOUBLE_EQ(s.prefix_cache_hit_rate, 0.4);
}

TEST(bench_chat_target, a_turn_that_fails_ends_its_conversation) {
  canned_server server;
  chat_workload w = {conversation_of("a", {"A one.", "refuse", "A three."}),
                     conversation_of("b", {"B one.", "B two."})};
  run_progress progress;
  run_timing timing;
  auto records = run_chat_target(w, options_of(server), 0.01, progress, timing);
  ASSERT_EQ(records.size(), 5u);
  EXPECT_EQ(records[0].status, request_status::completed);
  EXPECT_EQ(records[1].status, request_status::rejected);
  EXPECT_EQ(records[1].turn, 2);
  EXPECT_EQ(records[2].status, request_status::failed);
  EXPECT_EQ(records[2].turn, 3);
  EXPECT_EQ(records[2].message, "not sent: turn 2 did not complete");
  EXPECT_EQ(records[3].status, request_status::completed);
  EXPECT_EQ(records[4].status, request_status::completed);
  EXPECT_EQ(server.bodies().size(), 4u) << "turn 3 of a was never sent";
  EXPECT_EQ(progress.sent.load(), 4u);
  EXPECT_EQ(progress.ended.load(), 5u);
}
