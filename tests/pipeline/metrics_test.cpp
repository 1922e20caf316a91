// Tests of the metrics core: percentiles, histograms, the registry and its three renderings.
#include "pipeline/metrics.hpp"
#include "pipeline/metrics_json.hpp"
#include "pipeline/metrics_log.hpp"
#include "pipeline/metrics_prometheus.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace conveyor::pipeline {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// A fixed origin far from the clock's epoch.
const time_point t0 = time_point{} + std::chrono::seconds(1000);

// -- percentile ----------------------------------------------------------------------------------

TEST(percentile, interpolates_between_closest_ranks) {
  std::vector<double> xs = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_DOUBLE_EQ(percentile(xs, 50), 5.5);
  EXPECT_DOUBLE_EQ(percentile(xs, 90), 9.1);
  EXPECT_DOUBLE_EQ(percentile(xs, 99), 9.91);
  EXPECT_DOUBLE_EQ(percentile(xs, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(xs, 100), 10);
  EXPECT_DOUBLE_EQ(percentile(xs, 25), 3.25);
}

TEST(percentile, ignores_input_order_and_keeps_duplicates) {
  EXPECT_DOUBLE_EQ(percentile({10, 1, 7, 3, 9, 2, 8, 4, 6, 5}, 90), 9.1);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 2, 2}, 50), 2);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 2, 2}, 90), 3.4);
}

TEST(percentile, single_sample_is_every_percentile) {
  EXPECT_DOUBLE_EQ(percentile({7}, 0), 7);
  EXPECT_DOUBLE_EQ(percentile({7}, 50), 7);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
}

TEST(percentile, empty_or_nan_q_is_nan_and_q_is_clamped) {
  EXPECT_TRUE(std::isnan(percentile({}, 50)));
  EXPECT_TRUE(std::isnan(percentile({1, 2}, std::nan(""))));
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3}, -5), 1);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3}, 250), 3);
}

// -- histogram -----------------------------------------------------------------------------------

TEST(histogram, buckets_are_inclusive_and_cumulative) {
  histogram h{{1, 2, 5}};
  for (double x : {0.5, 1.0, 1.5, 2.0, 4.0, 7.0}) h.observe(x);
  h.observe(std::nan(""));  // ignored
  EXPECT_EQ(h.cumulative_counts(), (std::vector<uint64_t>{2, 4, 5, 6}));
  EXPECT_EQ(h.count(), 6u);
  EXPECT_DOUBLE_EQ(h.sum(), 16);
  EXPECT_DOUBLE_EQ(h.mean(), 16.0 / 6);
  EXPECT_DOUBLE_EQ(h.percentile(50), 1.75);
  EXPECT_EQ(h.reservoir().size(), 6u);
}

TEST(histogram, empty_histogram_has_nan_mean_and_percentiles) {
  histogram h{{1}};
  EXPECT_EQ(h.count(), 0u);
  EXPECT_TRUE(std::isnan(h.mean()));
  EXPECT_TRUE(std::isnan(h.percentile(50)));
  EXPECT_EQ(h.cumulative_counts(), (std::vector<uint64_t>{0, 0}));
}

TEST(histogram, rejects_unordered_or_infinite_bounds) {
  EXPECT_THROW(histogram({2, 1}), std::invalid_argument);
  EXPECT_THROW(histogram({1, 1}), std::invalid_argument);
  EXPECT_THROW(histogram({1, INFINITY}), std::invalid_argument);
}

TEST(histogram, reservoir_stays_bounded_and_counts_stay_exact) {
  histogram h{{100, 1000}, 100};
  for (int i = 0; i < 10000; ++i) h.observe(i);
  EXPECT_EQ(h.count(), 10000u);
  EXPECT_EQ(h.reservoir().size(), 100u);
  EXPECT_DOUBLE_EQ(h.mean(), 4999.5);
  EXPECT_EQ(h.cumulative_counts(), (std::vector<uint64_t>{101, 1001, 10000}));
  // A uniform sample of 100 out of 0..9999: its median lies near 5000.
  EXPECT_GT(h.percentile(50), 3500);
  EXPECT_LT(h.percentile(50), 6500);
  h.reset();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_TRUE(h.reservoir().empty());
  EXPECT_EQ(h.cumulative_counts(), (std::vector<uint64_t>{0, 0, 0}));
}

// -- registry fixture ----------------------------------------------------------------------------

// Seven requests (one of each outcome, three finished) and four steps on two executors; the
// clock stands at t0 + 100 ms. Durations are chosen so that the TTFT sum is exact in binary.
// Three requests looked up 38 prompt tokens in a prefix cache and found 12; cuda:0 has a block
// pool (8 used, 10 cached, 24 free after its step), cpu:0 none (its steps report 0 blocks).
class registry_test : public ::testing::Test {
 protected:
  registry_test() : registry([] { return t0 + milliseconds(100); }) {
    registry.record(finished_stop());
    registry.record(finished_length());
    registry.record(finished_one_token());
    registry.record(cancelled());
    registry.record(rejected());
    registry.record(expired());
    registry.record(failed());
    registry.record(executor_started{"cuda:0", t0, "cuda:0"});
    registry.record(step("cpu:0", step_kind::prefill, 2, 30, 40, 10, microseconds(5000)));
    registry.record(step("cpu:0", step_kind::decode, 2, 2, 2, 20, microseconds(2000)));
    registry.record(step("cpu:0", step_kind::decode, 1, 1, 1, 30, microseconds(2000)));
    registry.record(
        blocks(step("cuda:0", step_kind::prefill, 4, 16, 32, 50, microseconds(10000)), 8, 10, 24));
    registry.set_queue_depth(3);
    registry.set_running_sequences("cpu:0", 2);
  }

  static time_point at(double ms) {
    return t0 + std::chrono::duration_cast<duration>(std::chrono::duration<double, std::milli>(ms));
  }

  static request_timing request(outcome out, finish_reason reason, double arrival) {
    request_timing x;
    x.outcome = out;
    x.reason = reason;
    x.arrival = at(arrival);
    return x;
  }

  static std::vector<time_point> times(std::initializer_list<double> ms) {
    std::vector<time_point> result;
    for (auto x : ms) result.push_back(at(x));
    return result;
  }

  // Queue 8 ms, TTFT 125 ms, gaps 3 x 25 ms, TPOT 25 ms, E2E 200 ms.
  static request_timing finished_stop() {
    auto x = request(outcome::finished, finish_reason::stop, 0);
    x.tokenized = at(1);
    x.queued = at(2);
    x.admitted = at(10);
    x.first_token = at(125);
    x.token_times = times({125, 150, 175, 200});
    x.finished = at(200);
    x.prompt_tokens = 10;
    x.output_tokens = 4;
    x.cache_queried_tokens = 10;
    x.cached_tokens = 8;
    return x;
  }

  // Queue 4 ms, TTFT 250 ms, gaps 2 x 10 ms, TPOT 10 ms, E2E 270 ms.
  static request_timing finished_length() {
    auto x = request(outcome::finished, finish_reason::length, 100);
    x.tokenized = at(100);
    x.queued = at(101);
    x.admitted = at(105);
    x.first_token = at(350);
    x.token_times = times({350, 360, 370});
    x.finished = at(370);
    x.prompt_tokens = 20;
    x.output_tokens = 3;
    x.cache_queried_tokens = 20;  // nothing found
    return x;
  }

  // Queue 20 ms, TTFT 500 ms, no gaps, no TPOT (one token), E2E 500 ms.
  static request_timing finished_one_token() {
    auto x = request(outcome::finished, finish_reason::stop, 200);
    x.queued = at(200);
    x.admitted = at(220);
    x.first_token = at(700);
    x.token_times = times({700});
    x.finished = at(700);
    x.prompt_tokens = 5;
    x.output_tokens = 1;
    return x;
  }

  // Queue 30 ms, TTFT 62.5 ms, one gap of 10 ms; not finished, so no E2E.
  static request_timing cancelled() {
    auto x = request(outcome::cancelled, finish_reason::none, 300);
    x.queued = at(300);
    x.admitted = at(330);
    x.first_token = at(362.5);
    x.token_times = times({362.5, 372.5});
    x.finished = at(400);
    x.prompt_tokens = 8;
    x.output_tokens = 2;
    x.cache_queried_tokens = 8;
    x.cached_tokens = 4;
    return x;
  }

  // Never queued or admitted: its prompt counts nowhere.
  static request_timing rejected() {
    auto x = request(outcome::rejected, finish_reason::none, 400);
    x.tokenized = at(401);
    x.finished = at(401);
    x.prompt_tokens = 600;
    return x;
  }

  // Queued, never admitted; ends last (at 1500 ms).
  static request_timing expired() {
    auto x = request(outcome::expired, finish_reason::none, 500);
    x.queued = at(500);
    x.finished = at(1500);
    x.prompt_tokens = 7;
    return x;
  }

  // Queue 1 ms, admitted, lost before its first token.
  static request_timing failed() {
    auto x = request(outcome::failed, finish_reason::none, 600);
    x.queued = at(600);
    x.admitted = at(601);
    x.finished = at(900);
    x.prompt_tokens = 9;
    return x;
  }

  static step_timing step(std::string executor, step_kind kind, std::size_t batch,
                          std::size_t tokens, std::size_t padded, double start_ms,
                          duration elapsed) {
    return step_timing{std::move(executor), kind, batch, tokens, padded, at(start_ms), elapsed};
  }

  // `x` with the block gauges of an executor with a block pool.
  static step_timing blocks(step_timing x, int32_t used, int32_t cached, int32_t free) {
    x.kv_blocks_used = used;
    x.kv_blocks_cached = cached;
    x.kv_blocks_free = free;
    return x;
  }

  metrics_registry registry;
};

// -- registry: counters and histograms -----------------------------------------------------------

TEST_F(registry_test, counts_requests_by_outcome_and_reason) {
  EXPECT_EQ(registry.requests(outcome::finished), 3u);
  EXPECT_EQ(registry.requests(outcome::cancelled), 1u);
  EXPECT_EQ(registry.requests(outcome::expired), 1u);
  EXPECT_EQ(registry.requests(outcome::rejected), 1u);
  EXPECT_EQ(registry.requests(outcome::failed), 1u);
  EXPECT_EQ(registry.requests_total(), 7u);
  EXPECT_EQ(registry.finished(finish_reason::stop), 2u);
  EXPECT_EQ(registry.finished(finish_reason::length), 1u);
  EXPECT_EQ(registry.finished(finish_reason::none), 0u);
  uint64_t sum = 0;
  for (auto x : {outcome::finished, outcome::cancelled, outcome::expired, outcome::rejected,
                 outcome::failed})
    sum += registry.requests(x);
  EXPECT_EQ(sum, 7u);
}

TEST_F(registry_test, counts_tokens) {
  EXPECT_EQ(registry.prompt_tokens_total(), 10u + 20 + 5 + 8 + 9);  // admitted only
  EXPECT_EQ(registry.generation_tokens_total(), 4u + 3 + 1 + 2);
  // 10 tokens over the span from 0 ms to 1500 ms.
  EXPECT_DOUBLE_EQ(registry.tokens_per_second(), 10 / 1.5);
}

TEST_F(registry_test, counts_prefix_cache_queries_and_hits_in_tokens) {
  // Every outcome counts: the cancelled request had looked its prompt up when it was admitted.
  EXPECT_EQ(registry.prefix_cache_queries_total(), 10u + 20 + 8);
  EXPECT_EQ(registry.prefix_cache_hits_total(), 8u + 4);
  EXPECT_DOUBLE_EQ(registry.prefix_cache_hit_rate(), 12.0 / 38);
  metrics_registry empty;
  EXPECT_TRUE(std::isnan(empty.prefix_cache_hit_rate()));
}

TEST_F(registry_test, queue_time) {
  const auto& h = registry.queue_time();
  EXPECT_EQ(h.count(), 5u);
  EXPECT_NEAR(h.sum(), 0.063, 1e-12);
  EXPECT_NEAR(h.mean(), 0.0126, 1e-12);
  EXPECT_NEAR(h.percentile(50), 0.008, 1e-12);
  EXPECT_NEAR(h.percentile(90), 0.026, 1e-12);
  EXPECT_NEAR(h.percentile(99), 0.0296, 1e-12);
  // Bounds 0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 ...; samples 1 4 8 20 30 ms.
  auto counts = h.cumulative_counts();
  ASSERT_EQ(counts.size(), h.upper_bounds().size() + 1);
  EXPECT_EQ(std::vector<uint64_t>(counts.begin(), counts.begin() + 7),
            (std::vector<uint64_t>{0, 1, 1, 2, 3, 4, 5}));
  EXPECT_EQ(counts.back(), 5u);
}

TEST_F(registry_test, time_to_first_token) {
  const auto& h = registry.time_to_first_token();
  EXPECT_EQ(h.count(), 4u);  // every request with a first token, cancelled included
  EXPECT_DOUBLE_EQ(h.sum(), 0.9375);
  EXPECT_DOUBLE_EQ(h.mean(), 0.234375);
  EXPECT_DOUBLE_EQ(h.percentile(50), 0.1875);
  EXPECT_DOUBLE_EQ(h.percentile(90), 0.425);
  EXPECT_DOUBLE_EQ(h.percentile(99), 0.4925);
  // Bounds 0.001 0.0025 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 0.75 ...
  auto counts = h.cumulative_counts();
  EXPECT_EQ(std::vector<uint64_t>(counts.begin(), counts.begin() + 12),
            (std::vector<uint64_t>{0, 0, 0, 0, 0, 0, 0, 1, 1, 3, 4, 4}));
  EXPECT_EQ(counts.back(), 4u);
}

TEST_F(registry_test, inter_token_latency_and_time_per_output_token) {
  const auto& itl = registry.inter_token_latency();
  EXPECT_EQ(itl.count(), 6u);  // 3 + 2 + 0 + 1 gaps
  EXPECT_NEAR(itl.sum(), 0.105, 1e-12);
  EXPECT_NEAR(itl.mean(), 0.0175, 1e-12);
  EXPECT_NEAR(itl.percentile(50), 0.0175, 1e-12);
  EXPECT_NEAR(itl.percentile(90), 0.025, 1e-12);
  const auto& tpot = registry.time_per_output_token();
  EXPECT_EQ(tpot.count(), 2u);  // finished with two or more tokens
  EXPECT_NEAR(tpot.sum(), 0.035, 1e-12);
  EXPECT_NEAR(tpot.percentile(50), 0.0175, 1e-12);
}

TEST_F(registry_test, e2e_latency_and_request_sizes_count_finished_requests) {
  const auto& e2e = registry.e2e_latency();
  EXPECT_EQ(e2e.count(), 3u);
  EXPECT_NEAR(e2e.sum(), 0.97, 1e-12);
  EXPECT_NEAR(e2e.percentile(50), 0.27, 1e-12);
  EXPECT_NEAR(e2e.percentile(90), 0.454, 1e-12);
  const auto& prompt = registry.request_prompt_tokens();
  EXPECT_EQ(prompt.count(), 3u);
  EXPECT_DOUBLE_EQ(prompt.sum(), 35);
  EXPECT_DOUBLE_EQ(prompt.percentile(50), 10);
  // Bounds 1 8 16 32 ...
  auto prompt_counts = prompt.cumulative_counts();
  EXPECT_EQ(std::vector<uint64_t>(prompt_counts.begin(), prompt_counts.begin() + 4),
            (std::vector<uint64_t>{0, 1, 2, 3}));
  const auto& output = registry.request_output_tokens();
  EXPECT_EQ(output.count(), 3u);
  EXPECT_DOUBLE_EQ(output.sum(), 8);
  EXPECT_DOUBLE_EQ(output.mean(), 8.0 / 3);
}

TEST_F(registry_test, step_histograms) {
  const auto& batch = registry.batch_size();
  EXPECT_EQ(batch.count(), 4u);
  EXPECT_DOUBLE_EQ(batch.sum(), 9);
  EXPECT_DOUBLE_EQ(batch.mean(), 2.25);
  EXPECT_DOUBLE_EQ(batch.percentile(50), 2);
  EXPECT_DOUBLE_EQ(batch.percentile(90), 3.4);
  EXPECT_DOUBLE_EQ(batch.percentile(99), 3.94);
  // Bounds 1 2 4 8 ...
  auto batch_counts = batch.cumulative_counts();
  EXPECT_EQ(std::vector<uint64_t>(batch_counts.begin(), batch_counts.begin() + 4),
            (std::vector<uint64_t>{1, 3, 4, 4}));
  const auto& padding = registry.padding_fraction();
  EXPECT_EQ(padding.count(), 4u);
  EXPECT_DOUBLE_EQ(padding.sum(), 0.75);  // 0.25 + 0 + 0 + 0.5
  EXPECT_DOUBLE_EQ(padding.mean(), 0.1875);
  // Bounds 0 0.05 0.1 0.2 0.3 0.4 0.5 ...
  auto padding_counts = padding.cumulative_counts();
  EXPECT_EQ(std::vector<uint64_t>(padding_counts.begin(), padding_counts.begin() + 7),
            (std::vector<uint64_t>{2, 2, 2, 2, 3, 3, 4}));
  const auto& prefill = registry.step_time(step_kind::prefill);
  EXPECT_EQ(prefill.count(), 2u);
  EXPECT_NEAR(prefill.sum(), 0.015, 1e-12);
  EXPECT_NEAR(prefill.percentile(50), 0.0075, 1e-12);
  const auto& decode = registry.step_time(step_kind::decode);
  EXPECT_EQ(decode.count(), 2u);
  EXPECT_NEAR(decode.sum(), 0.004, 1e-12);
}

TEST_F(registry_test, gauges) {
  EXPECT_EQ(registry.executors(), (std::vector<std::string>{"cpu:0", "cuda:0"}));
  EXPECT_NEAR(registry.busy_seconds("cpu:0"), 0.009, 1e-12);
  EXPECT_NEAR(registry.busy_seconds("cuda:0"), 0.010, 1e-12);
  // cpu:0 started with its first step (10 ms), cuda:0 at its start message (0 ms); now = 100 ms.
  EXPECT_NEAR(registry.busy_ratio("cpu:0"), 0.009 / 0.090, 1e-12);
  EXPECT_NEAR(registry.busy_ratio("cuda:0"), 0.010 / 0.100, 1e-12);
  EXPECT_EQ(registry.busy_ratio("nowhere"), 0);
  EXPECT_EQ(registry.queue_depth(), 3u);
  EXPECT_EQ(registry.running_sequences("cpu:0"), 2u);
  EXPECT_EQ(registry.running_sequences("cuda:0"), 0u);
}

TEST_F(registry_test, kv_blocks_are_the_latest_step_s_of_executors_with_a_block_pool) {
  auto cuda = registry.kv_blocks("cuda:0");
  ASSERT_TRUE(cuda);
  EXPECT_EQ(cuda->used, 8u);
  EXPECT_EQ(cuda->cached, 10u);
  EXPECT_EQ(cuda->free, 24u);
  EXPECT_FALSE(registry.kv_blocks("cpu:0")) << "its steps all reported 0 blocks: no pool";
  EXPECT_FALSE(registry.kv_blocks("nowhere"));
  // The latest step's gauges replace the earlier ones.
  registry.record(
      blocks(step("cuda:0", step_kind::decode, 4, 4, 4, 60, microseconds(100)), 12, 9, 20));
  cuda = registry.kv_blocks("cuda:0");
  ASSERT_TRUE(cuda);
  EXPECT_EQ(cuda->used, 12u);
  EXPECT_EQ(cuda->cached, 9u);
  EXPECT_EQ(cuda->free, 20u);
  // A restarted executor has a new pool: no gauges until its first step.
  registry.record(executor_started{"cuda:0", t0 + milliseconds(70), "cuda:0"});
  EXPECT_FALSE(registry.kv_blocks("cuda:0"));
  registry.record(
      blocks(step("cuda:0", step_kind::prefill, 1, 4, 4, 80, microseconds(100)), 1, 0, 31));
  ASSERT_TRUE(registry.kv_blocks("cuda:0"));
  EXPECT_EQ(registry.kv_blocks("cuda:0")->free, 31u);
  registry.reset();
  EXPECT_FALSE(registry.kv_blocks("cuda:0"));
  EXPECT_EQ(registry.prefix_cache_queries_total(), 0u);
  EXPECT_EQ(registry.prefix_cache_hits_total(), 0u);
}

TEST_F(registry_test, restart_forgets_busy_time) {
  registry.record(executor_started{"cpu:0", t0 + milliseconds(50), "cpu"});
  EXPECT_EQ(registry.busy_seconds("cpu:0"), 0);
  registry.record(step("cpu:0", step_kind::decode, 1, 1, 1, 60, microseconds(25000)));
  EXPECT_NEAR(registry.busy_ratio("cpu:0"), 0.5, 1e-12);
}

TEST_F(registry_test, reset_forgets_everything) {
  registry.reset();
  EXPECT_EQ(registry.requests_total(), 0u);
  EXPECT_EQ(registry.prompt_tokens_total(), 0u);
  EXPECT_EQ(registry.time_to_first_token().count(), 0u);
  EXPECT_EQ(registry.step_time(step_kind::prefill).count(), 0u);
  EXPECT_TRUE(registry.executors().empty());
  EXPECT_EQ(registry.queue_depth(), 0u);
  EXPECT_EQ(registry.tokens_per_second(), 0);
}

// -- registry: Prometheus text -------------------------------------------------------------------

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> result;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);) result.push_back(line);
  return result;
}

// Returns the lines from `first` up to (excluding) the next "# HELP" line.
std::vector<std::string> family(const std::vector<std::string>& lines, const std::string& first) {
  std::vector<std::string> result;
  bool inside = false;
  for (const auto& line : lines) {
    if (line == first)
      inside = true;
    else if (inside && line.rfind("# HELP ", 0) == 0)
      break;
    if (inside) result.push_back(line);
  }
  return result;
}

TEST_F(registry_test, prometheus_histogram_lines_are_exact) {
  auto lines = lines_of(prometheus_text(registry));
  auto ttft = family(lines,
                     "# HELP conveyor_time_to_first_token_seconds Seconds from a request's "
                     "arrival to its first output token.");
  const std::string n = "conveyor_time_to_first_token_seconds";
  std::vector<std::string> expected = {
      "# HELP " + n + " Seconds from a request's arrival to its first output token.",
      "# TYPE " + n + " histogram",
      n + "_bucket{le=\"0.001\"} 0",
      n + "_bucket{le=\"0.0025\"} 0",
      n + "_bucket{le=\"0.005\"} 0",
      n + "_bucket{le=\"0.01\"} 0",
      n + "_bucket{le=\"0.02\"} 0",
      n + "_bucket{le=\"0.04\"} 0",
      n + "_bucket{le=\"0.06\"} 0",
      n + "_bucket{le=\"0.08\"} 1",
      n + "_bucket{le=\"0.1\"} 1",
      n + "_bucket{le=\"0.25\"} 3",
      n + "_bucket{le=\"0.5\"} 4",
      n + "_bucket{le=\"0.75\"} 4",
      n + "_bucket{le=\"1\"} 4",
      n + "_bucket{le=\"2.5\"} 4",
      n + "_bucket{le=\"5\"} 4",
      n + "_bucket{le=\"7.5\"} 4",
      n + "_bucket{le=\"10\"} 4",
      n + "_bucket{le=\"20\"} 4",
      n + "_bucket{le=\"40\"} 4",
      n + "_bucket{le=\"80\"} 4",
      n + "_bucket{le=\"+Inf\"} 4",
      n + "_sum 0.9375",
      n + "_count 4",
  };
  EXPECT_EQ(ttft, expected);
  auto steps =
      family(lines, "# HELP conveyor_step_time_seconds Seconds per executor step, by kind.");
  ASSERT_GT(steps.size(), 2u);
  EXPECT_EQ(steps[1], "# TYPE conveyor_step_time_seconds histogram");
  EXPECT_EQ(steps[2], "conveyor_step_time_seconds_bucket{kind=\"prefill\",le=\"0.0001\"} 0");
  auto has = [&](const std::string& line) {
    return std::find(steps.begin(), steps.end(), line) != steps.end();
  };
  EXPECT_TRUE(has("conveyor_step_time_seconds_bucket{kind=\"prefill\",le=\"+Inf\"} 2"));
  EXPECT_TRUE(has("conveyor_step_time_seconds_count{kind=\"prefill\"} 2"));
  EXPECT_TRUE(has("conveyor_step_time_seconds_bucket{kind=\"decode\",le=\"0.0025\"} 2"));
  EXPECT_TRUE(has("conveyor_step_time_seconds_count{kind=\"decode\"} 2"));
}

TEST_F(registry_test, prometheus_counter_and_gauge_lines_are_exact) {
  auto lines = lines_of(prometheus_text(registry));
  std::vector<std::string> expected = {
      "# HELP conveyor_requests_total Requests that ended, by outcome.",
      "# TYPE conveyor_requests_total counter",
      "conveyor_requests_total{outcome=\"finished\"} 3",
      "conveyor_requests_total{outcome=\"cancelled\"} 1",
      "conveyor_requests_total{outcome=\"expired\"} 1",
      "conveyor_requests_total{outcome=\"rejected\"} 1",
      "conveyor_requests_total{outcome=\"failed\"} 1",
  };
  EXPECT_EQ(family(lines, expected.front()), expected);
  auto has = [&](const std::string& line) {
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  };
  EXPECT_TRUE(has("conveyor_finished_requests_total{reason=\"stop\"} 2"));
  EXPECT_TRUE(has("conveyor_finished_requests_total{reason=\"length\"} 1"));
  EXPECT_TRUE(has("# TYPE conveyor_prompt_tokens_total counter"));
  EXPECT_TRUE(has("conveyor_prompt_tokens_total 52"));
  EXPECT_TRUE(has("conveyor_generation_tokens_total 10"));
  EXPECT_TRUE(has("conveyor_request_output_tokens_sum 8"));
  // Busy ratios are sums of decimal fractions: compare their values, not their digits.
  auto value_of = [&](const std::string& series) {
    for (const auto& line : lines)
      if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    return -1.0;
  };
  EXPECT_NEAR(value_of("conveyor_executor_busy_ratio{executor=\"cpu:0\"}"), 0.1, 1e-12);
  EXPECT_NEAR(value_of("conveyor_executor_busy_ratio{executor=\"cuda:0\"}"), 0.1, 1e-12);
  EXPECT_NEAR(value_of("conveyor_executor_busy_seconds_total{executor=\"cpu:0\"}"), 0.009, 1e-12);
  EXPECT_TRUE(has("# TYPE conveyor_queue_depth gauge"));
  EXPECT_TRUE(has("conveyor_queue_depth 3"));
  EXPECT_TRUE(has("conveyor_running_sequences{executor=\"cpu:0\"} 2"));
}

TEST_F(registry_test, prometheus_prefix_cache_and_kv_block_lines_are_exact) {
  auto lines = lines_of(prometheus_text(registry));
  const std::vector<std::vector<std::string>> expected = {
      {"# HELP conveyor_prefix_cache_queries_total Prompt tokens looked up in an executor's "
       "prefix cache.",
       "# TYPE conveyor_prefix_cache_queries_total counter",
       "conveyor_prefix_cache_queries_total 38"},
      {"# HELP conveyor_prefix_cache_hits_total Prompt tokens found in an executor's prefix "
       "cache, read from cached KV blocks instead of computed.",
       "# TYPE conveyor_prefix_cache_hits_total counter", "conveyor_prefix_cache_hits_total 12"},
      // cpu:0 has no block pool: no sample.
      {"# HELP conveyor_kv_blocks_used KV-cache blocks referenced by an executor's running "
       "sequences.",
       "# TYPE conveyor_kv_blocks_used gauge", "conveyor_kv_blocks_used{executor=\"cuda:0\"} 8"},
      {"# HELP conveyor_kv_blocks_cached KV-cache blocks of an executor holding a cached prefix, "
       "referenced or not.",
       "# TYPE conveyor_kv_blocks_cached gauge",
       "conveyor_kv_blocks_cached{executor=\"cuda:0\"} 10"},
      {"# HELP conveyor_kv_blocks_free KV-cache blocks an executor can allocate: free or "
       "evictable.",
       "# TYPE conveyor_kv_blocks_free gauge", "conveyor_kv_blocks_free{executor=\"cuda:0\"} 24"},
  };
  for (const auto& family_lines : expected)
    EXPECT_EQ(family(lines, family_lines.front()), family_lines);
  // Without a pool anywhere and with nothing looked up: the counters at 0, the gauges without
  // samples.
  metrics_registry plain{[] { return t0; }};
  plain.record(step("cpu:0", step_kind::decode, 1, 1, 1, 0, microseconds(10)));
  auto plain_lines = lines_of(prometheus_text(plain));
  EXPECT_EQ(family(plain_lines, expected[0][0]).back(), "conveyor_prefix_cache_queries_total 0");
  EXPECT_EQ(family(plain_lines, expected[1][0]).back(), "conveyor_prefix_cache_hits_total 0");
  for (std::size_t i = 2; i < expected.size(); ++i)
    EXPECT_EQ(family(plain_lines, expected[i][0]),
              (std::vector<std::string>{expected[i][0], expected[i][1]}));
}

// Splits a sample line into its series (name and labels) and value.
std::pair<std::string, std::string> split_sample(const std::string& line) {
  auto space = line.rfind(' ');
  return {line.substr(0, space), line.substr(space + 1)};
}

TEST_F(registry_test, prometheus_text_is_well_formed) {
  auto text = prometheus_text(registry);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  std::map<std::string, std::string> types;              // family -> type
  std::map<std::string, std::vector<uint64_t>> buckets;  // series without le -> counts
  std::map<std::string, std::string> last_le;
  std::map<std::string, uint64_t> counts;
  for (const auto& line : lines_of(text)) {
    ASSERT_FALSE(line.empty());
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream in{line.substr(7)};
      std::string name, type;
      in >> name >> type;
      EXPECT_TRUE(types.emplace(name, type).second) << "two TYPE lines for " << name;
      continue;
    }
    auto [series, value] = split_sample(line);
    auto name = series.substr(0, series.find('{'));
    EXPECT_EQ(name.rfind("conveyor_", 0), 0u) << line;
    // Every sample belongs to a family declared before it.
    auto family_name = name;
    for (std::string suffix : {"_bucket", "_sum", "_count"}) {
      auto base = name.size() > suffix.size() ? name.substr(0, name.size() - suffix.size()) : "";
      if (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
          types.count(base) && types[base] == "histogram")
        family_name = base;
    }
    ASSERT_TRUE(types.count(family_name)) << line;
    if (types[family_name] == "counter") {
      EXPECT_NE(name.find("_total"), std::string::npos);
    }
    if (family_name != name && name.size() > 7 && name.substr(name.size() - 7) == "_bucket") {
      // Strip le="..." to name the series.
      auto le_pos = series.find("le=\"");
      ASSERT_NE(le_pos, std::string::npos) << line;
      auto le_end = series.find('"', le_pos + 4);
      auto le = series.substr(le_pos + 4, le_end - le_pos - 4);
      auto key = family_name + series.substr(name.size(), le_pos - name.size());
      auto& series_counts = buckets[key];
      auto count = std::stoull(value);
      if (!series_counts.empty()) {
        EXPECT_LE(series_counts.back(), count) << line;
        EXPECT_LT(std::stod(last_le[key]), le == "+Inf" ? INFINITY : std::stod(le)) << line;
      }
      series_counts.push_back(count);
      last_le[key] = le;
    } else if (family_name != name && name.substr(name.size() - 6) == "_count") {
      auto labels = series.substr(name.size());
      auto key = family_name + (labels.empty() ? "{" : labels.substr(0, labels.size() - 1) + ",");
      counts[key] = std::stoull(value);
    }
  }
  EXPECT_EQ(types.size(), 25u);
  ASSERT_EQ(buckets.size(), 11u);  // 9 histograms + 2 step kinds
  for (const auto& [key, series_counts] : buckets) {
    EXPECT_EQ(last_le[key], "+Inf") << key;
    ASSERT_TRUE(counts.count(key)) << key;
    EXPECT_EQ(series_counts.back(), counts[key]) << key;
  }
}

TEST_F(registry_test, names_each_executor_s_device_and_counts_its_steps) {
  EXPECT_EQ(registry.executor_device("cuda:0"), "cuda:0");
  EXPECT_EQ(registry.executor_device("cpu:0"), "");  // it never said
  EXPECT_EQ(registry.executor_steps("cpu:0"), 3u);
  EXPECT_EQ(registry.executor_steps("cuda:0"), 1u);
  EXPECT_EQ(registry.executor_steps("nowhere"), 0u);
  auto lines = lines_of(prometheus_text(registry));
  auto has = [&](const std::string& line) {
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  };
  EXPECT_TRUE(has("# TYPE conveyor_executor_info gauge"));
  EXPECT_TRUE(has("conveyor_executor_info{executor=\"cuda:0\",device=\"cuda:0\"} 1"));
  EXPECT_TRUE(has("# TYPE conveyor_executor_steps_total counter"));
  EXPECT_TRUE(has("conveyor_executor_steps_total{executor=\"cpu:0\"} 3"));
  EXPECT_TRUE(has("conveyor_executor_steps_total{executor=\"cuda:0\"} 1"));
  auto j = nlohmann::json::parse(json_snapshot(registry));
  EXPECT_EQ(j["executors"]["cuda:0"]["device"], "cuda:0");
  EXPECT_EQ(j["executors"]["cuda:0"]["steps"], 1);
  EXPECT_TRUE(j["executors"]["cpu:0"]["device"].is_null());
  EXPECT_EQ(j["executors"]["cpu:0"]["steps"], 3);
  // A restart forgets the steps, not the device.
  registry.record(executor_started{"cuda:0", t0, ""});
  EXPECT_EQ(registry.executor_steps("cuda:0"), 0u);
  EXPECT_EQ(registry.executor_device("cuda:0"), "cuda:0");
  registry.reset();
  EXPECT_EQ(registry.executor_device("cuda:0"), "");
}

TEST(metrics_registry, prometheus_escapes_label_values) {
  metrics_registry registry{[] { return t0 + std::chrono::seconds(1); }};
  registry.set_running_sequences("a\\b\"c\nd", 1);
  auto text = prometheus_text(registry);
  EXPECT_NE(text.find("conveyor_running_sequences{executor=\"a\\\\b\\\"c\\nd\"} 1\n"),
            std::string::npos)
      << text;
}

// -- registry: JSON and summary ------------------------------------------------------------------

TEST_F(registry_test, json_snapshot_has_the_numbers) {
  auto j = nlohmann::json::parse(json_snapshot(registry));
  EXPECT_EQ(j["requests"]["finished"], 3);
  EXPECT_EQ(j["requests"]["cancelled"], 1);
  EXPECT_EQ(j["requests"]["expired"], 1);
  EXPECT_EQ(j["requests"]["rejected"], 1);
  EXPECT_EQ(j["requests"]["failed"], 1);
  EXPECT_EQ(j["requests"]["total"], 7);
  EXPECT_EQ(j["finish_reasons"]["stop"], 2);
  EXPECT_EQ(j["finish_reasons"]["length"], 1);
  EXPECT_EQ(j["tokens"]["prompt"], 52);
  EXPECT_EQ(j["tokens"]["generation"], 10);
  EXPECT_DOUBLE_EQ(j["tokens"]["per_second"].get<double>(), 10 / 1.5);
  const auto& ttft = j["histograms"]["time_to_first_token_seconds"];
  EXPECT_EQ(ttft["count"], 4);
  EXPECT_DOUBLE_EQ(ttft["sum"].get<double>(), 0.9375);
  EXPECT_DOUBLE_EQ(ttft["mean"].get<double>(), 0.234375);
  EXPECT_DOUBLE_EQ(ttft["p50"].get<double>(), 0.1875);
  EXPECT_DOUBLE_EQ(ttft["p90"].get<double>(), 0.425);
  EXPECT_DOUBLE_EQ(ttft["p99"].get<double>(), 0.4925);
  EXPECT_EQ(j["histograms"]["e2e_latency_seconds"]["count"], 3);
  EXPECT_NEAR(j["histograms"]["queue_time_seconds"]["p50"].get<double>(), 0.008, 1e-12);
  EXPECT_DOUBLE_EQ(j["histograms"]["batch_size"]["p90"].get<double>(), 3.4);
  EXPECT_EQ(j["histograms"]["step_time_seconds"]["prefill"]["count"], 2);
  EXPECT_EQ(j["histograms"]["step_time_seconds"]["decode"]["count"], 2);
  EXPECT_EQ(j["gauges"]["queue_depth"], 3);
  EXPECT_EQ(j["gauges"]["running_sequences"]["cpu:0"], 2);
  EXPECT_NEAR(j["gauges"]["executor_busy_ratio"]["cuda:0"].get<double>(), 0.1, 1e-12);
  EXPECT_EQ(j["prefix_cache"]["queries"], 38);
  EXPECT_EQ(j["prefix_cache"]["hits"], 12);
  EXPECT_DOUBLE_EQ(j["prefix_cache"]["hit_rate"].get<double>(), 12.0 / 38);
  EXPECT_EQ(j["gauges"]["kv_blocks"],
            nlohmann::json::parse(R"({"cuda:0": {"used": 8, "cached": 10, "free": 24}})"))
      << "only executors with a block pool";
  for (const auto& [name, h] : j["histograms"].items()) {
    if (h.contains("count")) {
      EXPECT_TRUE(h["count"].is_number_unsigned()) << name;
    }
  }
}

TEST(metrics_registry, json_snapshot_of_nothing_has_nulls) {
  metrics_registry registry;
  auto j = nlohmann::json::parse(json_snapshot(registry));
  EXPECT_EQ(j["requests"]["total"], 0);
  EXPECT_EQ(j["histograms"]["e2e_latency_seconds"]["count"], 0);
  EXPECT_TRUE(j["histograms"]["e2e_latency_seconds"]["mean"].is_null());
  EXPECT_TRUE(j["histograms"]["e2e_latency_seconds"]["p99"].is_null());
  EXPECT_TRUE(j["gauges"]["executor_busy_ratio"].is_object());
  EXPECT_EQ(j["prefix_cache"], nlohmann::json::parse(R"({"queries": 0, "hits": 0,
                                                         "hit_rate": null})"));
  EXPECT_EQ(j["gauges"]["kv_blocks"], nlohmann::json::object());
}

TEST_F(registry_test, summary_has_the_main_numbers) {
  auto s = registry.summarize();
  EXPECT_EQ(s.finished, 3u);
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.expired, 1u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.prompt_tokens, 52u);
  EXPECT_EQ(s.generation_tokens, 10u);
  EXPECT_NEAR(s.queue_time_p50, 0.008, 1e-12);
  EXPECT_DOUBLE_EQ(s.ttft_p50, 0.1875);
  EXPECT_DOUBLE_EQ(s.ttft_p99, 0.4925);
  EXPECT_NEAR(s.itl_mean, 0.0175, 1e-12);
  EXPECT_NEAR(s.tpot_p50, 0.0175, 1e-12);
  EXPECT_NEAR(s.e2e_p50, 0.27, 1e-12);
  EXPECT_DOUBLE_EQ(s.batch_size_mean, 2.25);
  EXPECT_DOUBLE_EQ(s.padding_fraction_mean, 0.1875);
  EXPECT_DOUBLE_EQ(s.tokens_per_second, 10 / 1.5);
  EXPECT_DOUBLE_EQ(s.prefix_cache_hit_rate, 12.0 / 38);
  EXPECT_DOUBLE_EQ(s.kv_cache_usage, 8.0 / 32);  // cuda:0's; cpu:0 has no pool
  EXPECT_EQ(summary_line(registry),
            "requests finished=3 cancelled=1 expired=1 rejected=1 failed=1 | queue p50=8ms "
            "p99=29.6ms | ttft p50=188ms p99=493ms | itl mean=17.5ms | tpot p50=17.5ms | e2e "
            "p50=270ms p99=495ms | batch mean=2.2 pad=18.8% | tok/s=6.7 | kv used=25.0% "
            "prefix hit=31.6%");
  // Two executors with a pool: their blocks add up (8 + 40 used of 32 + 64).
  registry.record(
      blocks(step("cuda:1", step_kind::decode, 1, 1, 1, 90, microseconds(100)), 40, 0, 24));
  EXPECT_DOUBLE_EQ(registry.summarize().kv_cache_usage, 48.0 / 96);
}

TEST(metrics_registry, summary_line_of_nothing_shows_dashes) {
  metrics_registry registry;
  EXPECT_EQ(summary_line(registry),
            "requests finished=0 cancelled=0 expired=0 rejected=0 failed=0 | queue p50=- p99=- "
            "| ttft p50=- p99=- | itl mean=- | tpot p50=- | e2e p50=- p99=- | batch mean=- "
            "pad=- | tok/s=0.0 | kv used=- prefix hit=-");
}

}  // namespace
}  // namespace conveyor::pipeline
