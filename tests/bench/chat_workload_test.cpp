// Chat workloads: generation is deterministic, with the turns, system prompts and lengths asked
// for; JSONL round-trips and names the line of a mistake.
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "bench/chat_workload.hpp"
#include "bench/random_text.hpp"

using namespace conveyor::bench;
using conveyor::message_of;

namespace {

chat_workload_spec spec_of(std::size_t conversations, std::size_t turns, uint64_t seed) {
  chat_workload_spec s;
  s.rate = 4;
  s.conversations = conversations;
  s.turns = turns;
  s.seed = seed;
  s.system_tokens = 120;
  s.min_user_words = 3;
  s.max_user_words = 9;
  s.max_tokens = 17;
  return s;
}

std::size_t words_of(const std::string& text) {
  std::istringstream in{text};
  std::size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

std::size_t stops_of(const std::string& text) {
  std::size_t n = 0;
  for (char c : text) n += c == '.';
  return n;
}

}  // namespace

TEST(bench_chat_workload, generation_is_deterministic_for_a_seed) {
  auto a = generate_chat_workload(spec_of(10, 3, 7));
  auto b = generate_chat_workload(spec_of(10, 3, 7));
  auto c = generate_chat_workload(spec_of(10, 3, 8));
  ASSERT_EQ(a.size(), 10u);
  EXPECT_EQ(to_jsonl(a), to_jsonl(b));
  EXPECT_NE(to_jsonl(a), to_jsonl(c));
}

TEST(bench_chat_workload, conversations_have_the_turns_and_lengths_asked_for) {
  auto w = generate_chat_workload(spec_of(50, 4, 1));
  ASSERT_EQ(w.size(), 50u);
  EXPECT_EQ(turns_of(w), 200u);
  EXPECT_EQ(w.front().arrival_s, 0.0);
  EXPECT_EQ(w.front().id, "c0000");
  EXPECT_EQ(w.back().id, "c0049");
  std::set<std::string> users;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (i > 0) {
      EXPECT_GE(w[i].arrival_s, w[i - 1].arrival_s);
    }
    EXPECT_EQ(w[i].user_messages.size(), 4u);
    EXPECT_EQ(w[i].max_tokens, 17);
    for (const auto& u : w[i].user_messages) {
      EXPECT_GE(words_of(u), 3u) << u;
      EXPECT_LE(words_of(u), 9u) << u;
      EXPECT_EQ(u.back(), '.');
      users.insert(u);
    }
  }
  EXPECT_GT(users.size(), 190u) << "user messages are drawn afresh";
  // 50 conversations at 4/s: the last starts near 12 s.
  EXPECT_GT(rate_of(w), 2.0);
  EXPECT_LT(rate_of(w), 8.0);
}

TEST(bench_chat_workload, every_conversation_shares_one_system_prompt_unless_distinct) {
  auto shared = generate_chat_workload(spec_of(20, 2, 3));
  for (const auto& c : shared) EXPECT_EQ(c.system_prompt, shared.front().system_prompt);
  // About 120 tokens: words and full stops together, exactly.
  const auto& text = shared.front().system_prompt;
  EXPECT_EQ(words_of(text) + stops_of(text), 120u) << text;

  auto spec = spec_of(20, 2, 3);
  spec.distinct_system = true;
  auto distinct = generate_chat_workload(spec);
  std::set<std::string> systems;
  for (const auto& c : distinct) {
    systems.insert(c.system_prompt);
    EXPECT_EQ(words_of(c.system_prompt) + stops_of(c.system_prompt), 120u);
  }
  EXPECT_EQ(systems.size(), 20u);

  spec.system_tokens = 0;
  for (const auto& c : generate_chat_workload(spec)) EXPECT_EQ(c.system_prompt, "");
}

TEST(bench_chat_workload, a_burst_starts_every_conversation_at_zero) {
  auto spec = spec_of(5, 1, 0);
  spec.rate = std::numeric_limits<double>::infinity();
  auto w = generate_chat_workload(spec);
  for (const auto& c : w) EXPECT_EQ(c.arrival_s, 0.0);
  EXPECT_TRUE(std::isinf(rate_of(w)));
}

TEST(bench_chat_workload, make_text_counts_words_and_full_stops) {
  std::mt19937_64 rng{5};
  for (int64_t n = 2; n < 200; ++n) {
    const auto text = make_text(rng, n);
    EXPECT_EQ(int64_t(words_of(text) + stops_of(text)), n) << text;
  }
  EXPECT_EQ(make_text(rng, 0), "");
}

TEST(bench_chat_workload, validate_names_the_flag) {
  auto ok = spec_of(3, 2, 0);
  EXPECT_FALSE(validate(ok));
  auto bad = ok;
  bad.turns = 0;
  EXPECT_EQ(message_of(validate(bad)), "--turns must be at least 1");
  bad = ok;
  bad.conversations = 0;
  EXPECT_EQ(message_of(validate(bad)), "--conversations must be at least 1");
  bad = ok;
  bad.min_user_words = 5;
  bad.max_user_words = 4;
  EXPECT_EQ(message_of(validate(bad)), "--user-words A,B needs 1 <= A <= B");
  bad = ok;
  bad.rate = 0;
  EXPECT_EQ(message_of(validate(bad)), "--rate must be positive (or inf)");
}

TEST(bench_chat_workload, jsonl_round_trips) {
  auto w = generate_chat_workload(spec_of(6, 3, 11));
  w[2].system_prompt = "";
  w[3].user_messages = {"Quote \" and\nnewline.", "ünïcode."};
  std::istringstream in{to_jsonl(w)};
  auto back = parse_chat_workload(in);
  ASSERT_TRUE(back) << message_of(back.error());
  ASSERT_EQ(back->size(), w.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ((*back)[i].id, w[i].id);
    EXPECT_EQ((*back)[i].arrival_s, w[i].arrival_s);
    EXPECT_EQ((*back)[i].system_prompt, w[i].system_prompt);
    EXPECT_EQ((*back)[i].user_messages, w[i].user_messages);
    EXPECT_EQ((*back)[i].max_tokens, w[i].max_tokens);
  }
  EXPECT_EQ(to_jsonl(*back), to_jsonl(w));
}

TEST(bench_chat_workload, parse_fills_what_may_be_left_out) {
  std::istringstream in{
      "{\"arrival_s\": 0, \"user_messages\": [\"Hi.\"], \"max_tokens\": 4}\n"
      "\n"
      "{\"id\": \"x\", \"arrival_s\": 1.5, \"system_prompt\": \"Be kind.\", "
      "\"user_messages\": [\"A.\", \"B.\"], \"max_tokens\": 8}\n"};
  auto w = parse_chat_workload(in);
  ASSERT_TRUE(w) << message_of(w.error());
  ASSERT_EQ(w->size(), 2u);
  EXPECT_EQ((*w)[0].id, "c0000");
  EXPECT_EQ((*w)[0].system_prompt, "");
  EXPECT_EQ((*w)[1].id, "x");
  EXPECT_EQ((*w)[1].user_messages, (std::vector<std::string>{"A.", "B."}));
  EXPECT_EQ(turns_of(*w), 3u);
}

TEST(bench_chat_workload, parse_names_the_line_of_a_mistake) {
  auto error_of = [](const std::string& text) {
    std::istringstream in{text};
    auto w = parse_chat_workload(in, "w.jsonl");
    return w ? std::string{} : message_of(w.error());
  };
  const std::string good = "{\"arrival_s\": 0, \"user_messages\": [\"Hi.\"], \"max_tokens\": 4}\n";
  EXPECT_EQ(error_of(good + "{\"arrival_s\": 1, \"max_tokens\": 4}\n"),
            "w.jsonl:2: user_messages: expected a non-empty array of strings");
  EXPECT_EQ(error_of(good + "{\"arrival_s\": 1, \"user_messages\": [], \"max_tokens\": 4}\n"),
            "w.jsonl:2: user_messages: expected a non-empty array of strings");
  EXPECT_EQ(error_of(good + "{\"arrival_s\": 1, \"user_messages\": [3], \"max_tokens\": 4}\n"),
            "w.jsonl:2: user_messages: expected a non-empty array of strings");
  EXPECT_EQ(error_of("{\"arrival_s\": 0, \"user_messages\": [\"a\"], \"max_tokens\": 0}\n"),
            "w.jsonl:1: max_tokens: expected an integer >= 1");
  EXPECT_EQ(error_of("{\"arrival_s\": 0, \"system_prompt\": 1, \"user_messages\": [\"a\"], "
                     "\"max_tokens\": 2}\n"),
            "w.jsonl:1: system_prompt: expected a string");
  EXPECT_EQ(error_of("{\"arrival_s\": 2, \"user_messages\": [\"a\"], \"max_tokens\": 2}\n" + good),
            "w.jsonl:2: arrival_s: lines must be in arrival order");
  EXPECT_EQ(error_of("not json\n"), "w.jsonl:1: not a JSON object");
  EXPECT_EQ(error_of(""), "w.jsonl: no conversations");
}
