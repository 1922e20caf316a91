// The token sampler of one sequence, alone: its own seeded generator (the same picks whatever
// else is sampled between them), logit processing on a copy of the row, the request's settings,
// and the log-probabilities of the row it drew from.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline/token_sampler.hpp"

using namespace conveyor;
using namespace conveyor::pipeline;

namespace {

constexpr int32_t vocab = 32;

// A row of logits with values that vary with `step`, so that draws differ from row to row.
std::vector<float> row_of(int step) {
  std::vector<float> row(vocab);
  for (int32_t t = 0; t < vocab; ++t) row[size_t(t)] = 0.1f * float((t * 7 + step * 3) % 11);
  return row;
}

sampling::sampling_params random_sampling(uint64_t seed) {
  sampling::sampling_params p;
  p.temperature = 1.0f;
  p.seed = seed;
  return p;
}

sampling::sampling_params greedy() {
  sampling::sampling_params p;
  p.temperature = 0;
  return p;
}

std::vector<int32_t> draw(token_sampler& s, int count, int first_step = 0) {
  std::vector<float> scratch;
  std::vector<int32_t> tokens;
  for (int i = 0; i < count; ++i) {
    auto row = row_of(first_step + i);
    tokens.push_back(s.sample(row.data(), vocab, scratch).token);
  }
  return tokens;
}

}  // namespace

TEST(token_sampler, a_seed_gives_the_same_tokens_whatever_is_sampled_between) {
  const std::vector<int32_t> prompt = {1, 3};
  auto alone = token_sampler(random_sampling(42), prompt, {});
  const auto want = draw(alone, 40);
  // The same seed, with another sequence's sampler drawing from the same rows in between.
  auto first = token_sampler(random_sampling(42), prompt, {});
  auto other = token_sampler(random_sampling(7), prompt, {});
  std::vector<float> scratch;
  std::vector<int32_t> got, others;
  for (int i = 0; i < 40; ++i) {
    auto row = row_of(i);
    others.push_back(other.sample(row.data(), vocab, scratch).token);
    got.push_back(first.sample(row.data(), vocab, scratch).token);
  }
  EXPECT_EQ(got, want);
  // Another seed draws other tokens (40 draws over many tokens never all agree by chance).
  EXPECT_NE(others, want);
}

TEST(token_sampler, greedy_picks_the_largest_logit) {
  auto s = token_sampler(greedy(), {1}, {});
  std::vector<float> row(vocab, 0.0f);
  row[17] = 3.0f;
  row[5] = 2.5f;
  std::vector<float> scratch;
  EXPECT_EQ(s.sample(row.data(), vocab, scratch).token, 17);
  EXPECT_FALSE(s.processes_logits());
  EXPECT_TRUE(scratch.empty());  // no logit processing: the row is not copied
}

TEST(token_sampler, logit_bias_changes_a_copy_of_the_row) {
  auto p = greedy();
  p.logit_bias = {{5, 1.0f}};
  auto s = token_sampler(p, {1}, {});
  EXPECT_TRUE(s.processes_logits());
  std::vector<float> row(vocab, 0.0f);
  row[17] = 3.0f;
  row[5] = 2.5f;
  const auto before = row;
  std::vector<float> scratch;
  EXPECT_EQ(s.sample(row.data(), vocab, scratch).token, 5);
  EXPECT_EQ(row, before);
  EXPECT_FLOAT_EQ(scratch[5], 3.5f);
}

TEST(token_sampler, presence_penalty_counts_the_tokens_it_picked) {
  auto p = greedy();
  p.presence_penalty = 1.0f;
  auto s = token_sampler(p, {1}, {});
  std::vector<float> row(vocab, -5.0f);
  row[3] = 1.0f;
  row[4] = 0.5f;
  std::vector<float> scratch;
  EXPECT_EQ(s.sample(row.data(), vocab, scratch).token, 3);
  // 3 is now at 0.0, below 4's 0.5.
  EXPECT_EQ(s.sample(row.data(), vocab, scratch).token, 4);
}

TEST(token_sampler, min_tokens_keeps_the_end_ids_out_until_reached) {
  auto p = greedy();
  p.min_tokens = 2;
  p.stop_token_ids = {9};
  const std::vector<int32_t> end_ids = {9, 2};
  auto s = token_sampler(p, {1}, end_ids);
  std::vector<float> row(vocab, 0.0f);
  row[2] = 5.0f;
  row[9] = 4.0f;
  row[11] = 1.0f;
  std::vector<float> scratch;
  EXPECT_EQ(s.sample(row.data(), vocab, scratch).token, 11);
  EXPECT_EQ(s.sample(row.data(), vocab, scratch).token, 11);
  EXPECT_EQ(s.sample(row.data(), vocab, scratch).token, 2);
  // Without min_tokens the end ids are not masked at all.
  auto free = token_sampler(greedy(), {1}, end_ids);
  EXPECT_FALSE(free.processes_logits());
  EXPECT_EQ(free.sample(row.data(), vocab, scratch).token, 2);
}

TEST(token_sampler, draws_with_the_request_settings) {
  sampling::sampling_params p;
  p.temperature = 0.7f;
  p.top_p = 0.9f;
  p.top_k = 12;
  p.seed = 99;
  auto s = token_sampler(p, {1}, {});
  EXPECT_FLOAT_EQ(s.params().temperature, 0.7f);
  EXPECT_FLOAT_EQ(s.params().top_p, 0.9f);
  EXPECT_EQ(s.params().top_k, 12);
  EXPECT_EQ(s.params().seed, 99u);
}

TEST(token_sampler, log_probabilities_only_when_asked_and_of_the_processed_row) {
  std::vector<float> row(vocab, 0.0f);
  row[17] = 2.0f;
  std::vector<float> scratch;
  auto none = token_sampler(greedy(), {1}, {});
  EXPECT_FALSE(none.sample(row.data(), vocab, scratch).scores);

  auto p = greedy();
  p.logprobs = 2;
  p.logit_bias = {{4, 3.0f}};
  auto s = token_sampler(p, {1}, {});
  const auto picked = s.sample(row.data(), vocab, scratch);
  EXPECT_EQ(picked.token, 4);
  ASSERT_TRUE(picked.scores);
  EXPECT_EQ(picked.scores->chosen.id, 4);
  // log_softmax of the biased row: 4 at 3, 17 at 2, 30 tokens at 0.
  const double total = std::exp(3.0) + std::exp(2.0) + 30.0;
  EXPECT_NEAR(picked.scores->chosen.logprob, 3.0 - std::log(total), 1e-5);
  ASSERT_EQ(picked.scores->top.size(), 2u);
  EXPECT_EQ(picked.scores->top[0].id, 4);
  EXPECT_EQ(picked.scores->top[1].id, 17);
  EXPECT_NEAR(picked.scores->top[1].logprob, 2.0 - std::log(total), 1e-5);

  // More alternatives than OpenAI's limit are capped at it.
  auto many = greedy();
  many.logprobs = 50;
  auto capped = token_sampler(many, {1}, {});
  EXPECT_EQ(capped.sample(row.data(), vocab, scratch).scores->top.size(),
            size_t(sampling::max_top_logprobs));
}
