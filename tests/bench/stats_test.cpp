// The numbers of a benchmark run: percentiles, counts and per-request latencies.
#include <cmath>

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
