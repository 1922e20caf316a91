// Workloads: generation is deterministic and within its ranges; JSONL round-trips.
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "bench/workload.hpp"

using namespace conveyor::bench;

namespace {

workload_spec spec_of(double rate, std::size_t n, uint64_t seed) {
  workload_spec s;
  s.rate = rate;
  s.requests = n;
  s.seed = seed;
  s.min_words = 3;
  s.max_words = 12;
  s.min_tokens = 4;
  s.max_tokens = 64;
  return s;
}

std::size_t words_of(const std::string& prompt) {
  std::istringstream in{prompt};
  std::size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

}  // namespace

TEST(bench_workload, generation_is_deterministic_for_a_seed) {
  auto a = generate_workload(spec_of(10, 50, 7));
  auto b = generate_workload(spec_of(10, 50, 7));
  auto c = generate_workload(spec_of(10, 50, 8));
  ASSERT_EQ(a.size(), 50u);
  EXPECT_EQ(to_jsonl(a), to_jsonl(b));
  EXPECT_NE(to_jsonl(a), to_jsonl(c));
}

TEST(bench_workload, generation_follows_the_ranges) {
  auto w = generate_workload(spec_of(20, 4000, 1));
  ASSERT_EQ(w.size(), 4000u);
  EXPECT_EQ(w.front().arrival_s, 0.0);
  EXPECT_EQ(w.front().id, "r0000");
  std::set<int32_t> tokens;
  std::set<std::size_t> words;
  std::size_t below_16 = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (i > 0) {
      EXPECT_GE(w[i].arrival_s, w[i - 1].arrival_s);
    }
    EXPECT_GE(w[i].max_tokens, 4);
    EXPECT_LE(w[i].max_tokens, 64);
    tokens.insert(w[i].max_tokens);
    below_16 += w[i].max_tokens < 16;
    const auto n = words_of(w[i].prompt);
    EXPECT_GE(n, 3u);
    EXPECT_LE(n, 12u);
    words.insert(n);
  }
  // Both ends are reached, and log-uniform puts half of [4, 64] below 16.
  EXPECT_EQ(*tokens.begin(), 4);
  EXPECT_EQ(*tokens.rbegin(), 64);
  EXPECT_NEAR(double(below_16) / double(w.size()), 0.5, 0.05);
  EXPECT_EQ(words.size(), 10u);
  // Poisson at 20/s: the mean gap is 1/20 s.
  EXPECT_NEAR(rate_of(w), 20.0, 1.0);
}

TEST(bench_workload, infinite_rate_is_a_burst) {
  auto w = generate_workload(spec_of(std::numeric_limits<double>::infinity(), 30, 3));
  for (const auto& r : w) EXPECT_EQ(r.arrival_s, 0.0);
  EXPECT_TRUE(std::isinf(rate_of(w)));
}

TEST(bench_workload, validate_names_the_bad_range) {
  auto s = spec_of(10, 5, 1);
  EXPECT_FALSE(validate(s));
  s.min_tokens = 100;
  auto err = validate(s);
  ASSERT_TRUE(err);
  EXPECT_NE(conveyor::message_of(err).find("--max-tokens"), std::string::npos);
  s = spec_of(0, 5, 1);
  EXPECT_TRUE(validate(s));
}

TEST(bench_workload, jsonl_round_trips) {
  auto w = generate_workload(spec_of(3.3, 25, 11));
  w[3].prompt = "A \"quoted\" line\nwith a newline and ünïcödé";
  std::istringstream in{to_jsonl(w)};
  auto back = parse_workload(in, "mem");
  ASSERT_TRUE(back) << conveyor::message_of(back.error());
  ASSERT_EQ(back->size(), w.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ((*back)[i].id, w[i].id);
    EXPECT_EQ((*back)[i].arrival_s, w[i].arrival_s);  // exact: doubles print round-trip
    EXPECT_EQ((*back)[i].prompt, w[i].prompt);
    EXPECT_EQ((*back)[i].max_tokens, w[i].max_tokens);
  }
  EXPECT_EQ(to_jsonl(*back), to_jsonl(w));
}

TEST(bench_workload, parse_names_the_line_of_a_mistake) {
  std::istringstream in{
      "{\"id\":\"a\",\"arrival_s\":0,\"prompt\":\"x\",\"max_tokens\":3}\n\n"
      "{\"id\":\"b\",\"arrival_s\":0.5,\"prompt\":\"y\"}\n"};
  auto w = parse_workload(in, "w.jsonl");
  ASSERT_FALSE(w);
  EXPECT_NE(conveyor::message_of(w.error()).find("w.jsonl:3: max_tokens"), std::string::npos)
      << conveyor::message_of(w.error());
}

TEST(bench_workload, shared_workload_loads) {
  auto w = load_workload(std::string{CONVEYOR_SOURCE_DIR} +
                         "/workloads/stories-poisson-r5-n100.jsonl");
  ASSERT_TRUE(w) << conveyor::message_of(w.error());
  EXPECT_EQ(w->size(), 100u);
  int64_t sum = 0;
  for (const auto& r : *w) sum += r.max_tokens;
  EXPECT_EQ(sum, 8478);
}
