// The numbers of a benchmark run: percentiles, counts and per-request latencies.
#include <cmath>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "bench/stats.hpp"

using namespace conveyor::bench;

TEST(bench_stats, describe_uses_numpy_linear_percentiles) {
  auto d = describe({10, 9, 8, 7, 6, 5, 4, 3, 2, 1});
  EXPECT_EQ(d.count, 10u);
  EXPECT_DOUBLE_EQ(d.mean, 5.5);
  EXPECT_DOUBLE_EQ(d.p50, 5.5);
  EXPECT_NEAR(d.p90, 9.1, 1e-12);
  EXPECT_NEAR(d.p99, 9.91, 1e-12);
  auto one = describe({0.25});
  EXPECT_DOUBLE_EQ(one.p50, 0.25);
  EXPECT_DOUBLE_EQ(one.p99, 0.25);
  auto none = describe({});
  EXPECT_EQ(none.count, 0u);
  EXPECT_TRUE(std::isnan(none.mean));
  EXPECT_TRUE(std::isnan(none.p90));
}

TEST(bench_stats, summarize_counts_and_times) {
  std::vector<request_record> records(4);
  // Completed: first token at 0.1 s, then 0.2, 0.4; end at 0.5 with 3 tokens.
  records[0].status = request_status::completed;
  records[0].chunk_times = {0.1, 0.2, 0.4};
  records[0].output_tokens = 3;
  records[0].end = 0.5;
  // Completed with one token.
  records[1].status = request_status::completed;
  records[1].chunk_times = {0.3};
  records[1].output_tokens = 1;
  records[1].end = 0.3;
  records[2].status = request_status::rejected;
  records[2].end = 0.01;
  records[3].status = request_status::failed;
  records[3].chunk_times = {0.2};
  records[3].output_tokens = 1;
  records[3].end = 2.0;
  auto s = summarize("continuous", 5.0, records, 2.0);
  EXPECT_EQ(s.requests, 4u);
  EXPECT_EQ(s.completed, 2u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.output_tokens, 4u);  // completed requests only
  EXPECT_DOUBLE_EQ(s.requests_per_s, 1.0);
  EXPECT_DOUBLE_EQ(s.output_tokens_per_s, 2.0);
  EXPECT_EQ(s.ttft.count, 2u);
  EXPECT_DOUBLE_EQ(s.ttft.mean, 0.2);
  EXPECT_EQ(s.tpot.count, 1u);
  EXPECT_DOUBLE_EQ(s.tpot.mean, 0.2);  // (0.5 - 0.1) / 2
  EXPECT_EQ(s.itl.count, 2u);          // 0.1 and 0.2
  EXPECT_NEAR(s.itl.mean, 0.15, 1e-12);
  EXPECT_EQ(s.e2e.count, 2u);
  EXPECT_DOUBLE_EQ(s.e2e.p50, 0.4);
  EXPECT_EQ(s.e2e_sorted, (std::vector<double>{0.3, 0.5}));
  EXPECT_TRUE(std::isnan(s.batch_size_mean));
}

namespace {

request_record turn_record(int32_t turn, double ttft, std::optional<int32_t> prompt,
                           std::optional<int32_t> cached,
                           request_status status = request_status::completed) {
  request_record r;
  r.status = status;
  r.turn = turn;
  r.chunk_times = {ttft};
  r.output_tokens = 1;
  r.end = ttft;
  r.prompt_tokens = prompt;
  r.cached_tokens = cached;
  return r;
}

}  // namespace

TEST(bench_stats, summarize_splits_ttft_by_turn_and_sums_cached_tokens) {
  // Two conversations of three turns; conversation b's turn 3 failed (its counts do not count).
  const std::vector<request_record> records = {
      turn_record(1, 0.10, 100, 0),
      turn_record(2, 0.04, 150, 100),
      turn_record(3, 0.02, 200, 150),
      turn_record(1, 0.30, 100, std::nullopt),  // no cached count: 0
      turn_record(2, 0.06, 150, 96),
      turn_record(3, 0.5, 200, 200, request_status::failed),
  };
  auto s = summarize("t", 1, records, 1);
  ASSERT_EQ(s.ttft_by_turn.size(), 3u);
  EXPECT_EQ(s.ttft_by_turn[0].count, 2u);
  EXPECT_DOUBLE_EQ(s.ttft_by_turn[0].mean, 0.2);
  EXPECT_DOUBLE_EQ(s.ttft_by_turn[0].p50, 0.2);
  EXPECT_EQ(s.ttft_by_turn[1].count, 2u);
  EXPECT_DOUBLE_EQ(s.ttft_by_turn[1].mean, 0.05);
  EXPECT_EQ(s.ttft_by_turn[2].count, 1u);
  EXPECT_DOUBLE_EQ(s.ttft_by_turn[2].mean, 0.02);
  EXPECT_EQ(s.ttft_later_turns.count, 3u);  // turns 2 and 3
  EXPECT_DOUBLE_EQ(s.ttft_later_turns.mean, 0.04);
  EXPECT_DOUBLE_EQ(s.ttft_later_turns.p50, 0.04);
  EXPECT_EQ(s.prompt_tokens, 700u);
  EXPECT_EQ(s.cached_tokens, 346u);
  EXPECT_DOUBLE_EQ(s.prefix_cache_hit_rate, 346.0 / 700.0);
}

TEST(bench_stats, the_hit_rate_is_nan_when_no_response_reported_cached_tokens) {
  auto s = summarize("t", 1, {turn_record(1, 0.1, 100, std::nullopt)}, 1);
  EXPECT_EQ(s.prompt_tokens, 100u);
  EXPECT_TRUE(std::isnan(s.prefix_cache_hit_rate));
  // Records outside conversations (turn 0) have no turns.
  request_record plain;
  plain.status = request_status::completed;
  plain.chunk_times = {0.1};
  auto p = summarize("t", 1, {plain}, 1);
  EXPECT_TRUE(p.ttft_by_turn.empty());
  EXPECT_EQ(p.ttft_later_turns.count, 0u);
  EXPECT_EQ(p.prompt_tokens, 0u);
  EXPECT_TRUE(std::isnan(p.prefix_cache_hit_rate));
}

TEST(bench_stats, summarize_keeps_the_tpot_of_constrained_requests_apart) {
  std::vector<request_record> records(3);
  for (auto& r : records) {
    r.status = request_status::completed;
    r.chunk_times = {0.1};
    r.output_tokens = 3;
  }
  records[0].end = 0.3;  // TPOT 0.1
  records[1].end = 0.5;  // 0.2
  records[2].end = 0.9;  // 0.4, constrained
  records[2].constrained = true;
  auto s = summarize("continuous", 5.0, records, 1.0);
  EXPECT_EQ(s.tpot.count, 3u);
  EXPECT_EQ(s.tpot_unconstrained.count, 2u);
  EXPECT_NEAR(s.tpot_unconstrained.mean, 0.15, 1e-12);
  EXPECT_EQ(s.tpot_constrained.count, 1u);
  EXPECT_NEAR(s.tpot_constrained.mean, 0.4, 1e-12);
  EXPECT_EQ(s.constrained_completed, 1u);
  EXPECT_EQ(s.constrained_output_tokens, 3u);
  // Without constrained requests every TPOT is an unconstrained one.
  records[2].constrained = false;
  s = summarize("continuous", 5.0, records, 1.0);
  EXPECT_EQ(s.tpot_unconstrained.count, 3u);
  EXPECT_EQ(s.tpot_constrained.count, 0u);
  EXPECT_EQ(s.constrained_completed, 0u);
}
