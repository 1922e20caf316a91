// The in-process replay on the tiny real model: every request is counted exactly once, for
// every policy.
#include <gtest/gtest.h>
#include <caf/all.hpp>

#include "actors/caf_error.hpp"
#include "actors/spawn.hpp"
#include "bench/in_process.hpp"
#include "tokenizers/tokenizer.hpp"

using namespace conveyor;
using namespace conveyor::bench;

namespace {

workload tiny_workload() {
  workload_spec spec;
  spec.rate = 100;
  spec.requests = 20;
  spec.seed = 4;
  spec.min_words = 2;
  spec.max_words = 8;
  spec.min_tokens = 2;
  spec.max_tokens = 8;
  return generate_workload(spec);
}

caf::actor_system_config& quiet(caf::actor_system_config& cfg) {
  add_error_category(cfg);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  return cfg;
}

struct bench_in_process : ::testing::TestWithParam<std::string> {
  caf::actor_system_config cfg;
  caf::actor_system system{quiet(cfg)};
};

}  // namespace

TEST_P(bench_in_process, counts_add_up) {
  const auto w = tiny_workload();
  config::pipeline cfg;  // the embedded stories260K
  cfg.executors = config::resolve_executors(cfg, 0);
  cfg.auto_executors = false;
  cfg.executors[0].threads = 1;
  cfg.executors[0].slots = 4;
  cfg.batcher.max_batch_size = 4;
  cfg.batcher.max_num_seqs = 4;
  run_progress progress;
  auto s = run_in_process(system, cfg, GetParam(), w, 100, progress);
  ASSERT_TRUE(s) << message_of(s.error());
  EXPECT_EQ(s->name, GetParam());
  EXPECT_EQ(s->requests, w.size());
  EXPECT_EQ(s->completed, w.size());
  EXPECT_EQ(progress.sent.load(), w.size());
  EXPECT_EQ(progress.ended.load(), w.size());
  EXPECT_GT(s->output_tokens, 0u);
  EXPECT_EQ(s->e2e.count, s->completed);
  EXPECT_LE(s->ttft.p50, s->e2e.p50);
  EXPECT_GE(s->wall_s, w.back().arrival_s);
  EXPECT_GT(s->process_cpu_s, 0.0);  // measured over the run, the pipeline's work in it
  EXPECT_GE(s->batch_size_mean, 1.0);
  EXPECT_GE(s->padding_fraction, 0.0);
  EXPECT_GT(s->executor_busy_ratio, 0.0);
  if (GetParam() == "sequential") {
    EXPECT_DOUBLE_EQ(s->batch_size_mean, 1.0);
  }
}

TEST_P(bench_in_process, rejections_are_counted) {
  // A burst, with one request too big for the queue's token bound: the queue refuses it even
  // when empty, and takes all the others even if every one of them waits at once, so exactly
  // one is refused however fast the executor runs.
  auto w = tiny_workload();
  for (auto& r : w) r.arrival_s = 0;
  config::pipeline cfg;
  auto tokenizer = tokenizers::load_tokenizer(tokenizer_file(cfg));
  ASSERT_TRUE(tokenizer) << message_of(tokenizer.error());
  auto& big = w[w.size() / 2];
  big.prompt = "Once upon a time";
  const auto big_prompt = int64_t((*tokenizer)->encode(big.prompt, true)->size());
  big.max_tokens = int32_t(512 - big_prompt);  // the whole context
  cfg.batcher.max_queued_tokens = 511;
  int64_t others = 0;
  for (const auto& r : w)
    if (&r != &big) others += int64_t((*tokenizer)->encode(r.prompt, true)->size()) + r.max_tokens;
  ASSERT_LE(others, cfg.batcher.max_queued_tokens) << "the others must fit together";
  run_progress progress;
  auto s = run_in_process(system, cfg, GetParam(), w, 0, progress);
  ASSERT_TRUE(s) << message_of(s.error());
  EXPECT_EQ(s->rejected, 1u);
  EXPECT_EQ(s->completed, w.size() - 1);
  EXPECT_EQ(s->failed, 0u);
  EXPECT_EQ(progress.ended.load(), w.size());
}

TEST(bench_in_process_synthetic, random_weights_generate_exactly_max_tokens) {
  caf::actor_system_config sys_cfg;
  caf::actor_system system{quiet(sys_cfg)};
  workload w;
  for (int i = 0; i < 3; ++i) w.push_back({"r" + std::to_string(i), 0, "Once upon a time", 5 + i});
  config::pipeline cfg;
  cfg.model.path = "synthetic:s15m";
  run_progress progress;
  auto s = run_in_process(system, cfg, "continuous", w, 0, progress);
  ASSERT_TRUE(s) << message_of(s.error());
  EXPECT_EQ(s->completed, 3u);
  EXPECT_EQ(s->output_tokens, 5u + 6u + 7u);
}

TEST(bench_in_process_formats, a_share_of_the_requests_asks_for_the_schema) {
  caf::actor_system_config sys_cfg;
  caf::actor_system system{quiet(sys_cfg)};
  const auto w = tiny_workload();
  config::pipeline cfg;  // the embedded stories260K
  run_progress progress;
  auto s = run_in_process(system, cfg, "continuous", w, 100, progress, {}, {0.5});
  ASSERT_TRUE(s) << message_of(s.error());
  EXPECT_EQ(s->completed, w.size());
  EXPECT_EQ(s->constrained_completed, w.size() / 2);
  EXPECT_GT(s->constrained_output_tokens, 0u);
  EXPECT_EQ(s->tpot_unconstrained.count + s->tpot_constrained.count, s->tpot.count);
}

INSTANTIATE_TEST_SUITE_P(policies, bench_in_process,
                         ::testing::Values("sequential", "seed", "continuous"));
