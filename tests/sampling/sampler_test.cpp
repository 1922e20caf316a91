// Sampling: greedy, temperature, top-k, top-p and per-request seeds, alone and in a batch.
#include <cmath>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "model/causal_lm.hpp"
#include "model/slot_tables.hpp"
#include "sampling/sampler.hpp"
#include "tests/support/model_files.hpp"
#include "tests/support/sampling_params.hpp"

using namespace conveyor;
using namespace conveyor::sampling;
using conveyor::test::sampling_of;
using namespace conveyor::model;

TEST(sampler, greedy_is_argmax_first_on_ties) {
  std::vector<float> logits{0.1f, 3.0f, -1.0f, 3.0f};
  sampler s(sampling_of(0.0f, 1.0f, 0, 42));
  EXPECT_EQ(s.sample(logits.data(), 4), 1);
  EXPECT_EQ(argmax(logits.data(), 4), 1);
}

TEST(sampler, top_k_one_is_greedy) {
  std::vector<float> logits{0.1f, 0.5f, 2.0f, 1.9f};
  sampler s(sampling_of(1.0f, 1.0f, 1, 7));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(logits.data(), 4), 2);
}

TEST(sampler, top_k_keeps_only_the_k_best) {
  std::vector<float> logits{5.0f, 4.9f, 4.8f, 0.0f, 0.0f, 0.0f};
  sampler s(sampling_of(2.0f, 1.0f, 2, 3));
  std::set<int32_t> seen;
  for (int i = 0; i < 500; ++i) seen.insert(s.sample(logits.data(), 6));
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1}));
}

TEST(sampler, top_p_cuts_the_tail) {
  // Probabilities ~ 0.6, 0.3, 0.1 at temperature 1: top_p 0.8 keeps the first two.
  std::vector<float> logits{std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  sampler s(sampling_of(1.0f, 0.8f, 0, 11));
  std::map<int32_t, int> counts;
  for (int i = 0; i < 3000; ++i) ++counts[s.sample(logits.data(), 3)];
  EXPECT_EQ(counts.count(2), 0u);
  // 0.6/0.9 = 2/3 of draws pick token 0.
  EXPECT_NEAR(counts[0] / 3000.0, 2.0 / 3.0, 0.04);
}

TEST(sampler, temperature_follows_the_softmax) {
  std::vector<float> logits{0.0f, std::log(3.0f)};  // p = 0.25, 0.75 at temperature 1
  sampler s(sampling_of(1.0f, 1.0f, 0, 5));
  int ones = 0;
  for (int i = 0; i < 4000; ++i) ones += s.sample(logits.data(), 2);
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

TEST(sampler, same_seed_same_tokens_other_seed_other_tokens) {
  std::vector<float> logits(64);
  for (int i = 0; i < 64; ++i) logits[i] = float(i % 7) * 0.3f;
  auto draw = [&](uint64_t seed) {
    sampler s(sampling_of(0.9f, 0.95f, 0, seed));
    std::vector<int32_t> out;
    for (int i = 0; i < 40; ++i) out.push_back(s.sample(logits.data(), 64));
    return out;
  };
  EXPECT_EQ(draw(1234), draw(1234));
  EXPECT_NE(draw(1234), draw(4321));
}

namespace {

// Generates `n` tokens for the expected prompt with a seeded sampler; `others` more sequences
// share every prefill and decode step when > 0.
std::vector<int32_t> sample_story(uint64_t seed, int others) {
  runtime_options opt;
  opt.slots = 1 + others;
  auto m = load_model(test::stories_model(), opt);
  EXPECT_TRUE(m);
  auto& model = **m;
  auto run = test::load_expected_run();
  std::vector<std::vector<int32_t>> prompts{run.prompt};
  for (int i = 0; i < others; ++i) prompts.push_back({1, 300 + i, 301 + i, 400 - i});
  const slot_tables tables(model);
  std::vector<prefill_item> items;
  for (int i = 0; i <= others; ++i)
    items.push_back({tables[others - i], 0, prompts[i].data(), int32_t(prompts[i].size()), -1});
  std::vector<sampler> samplers;
  samplers.emplace_back(sampling_of(0.8f, 0.9f, 40, seed));
  for (int i = 0; i < others; ++i) samplers.emplace_back(sampling_of(1.0f, 1.0f, 0, 99u + i));
  auto logits = model.prefill(items);
  std::vector<int32_t> next(others + 1), pos(others + 1);
  for (int i = 0; i <= others; ++i) {
    next[i] = samplers[i].sample(logits.row(i), logits.vocab);
    pos[i] = int32_t(prompts[i].size());
  }
  std::vector<int32_t> out{next[0]};
  for (int step = 0; step < 30; ++step) {
    std::vector<decode_item> d;
    for (int i = 0; i <= others; ++i) d.push_back({tables[others - i], pos[i]++, next[i]});
    auto l = model.decode(d);
    for (int i = 0; i <= others; ++i) next[i] = samplers[i].sample(l.row(i), l.vocab);
    out.push_back(next[0]);
  }
  return out;
}

}  // namespace

TEST(sampler, seeded_request_is_reproducible_alone_and_in_a_batch) {
  auto alone = sample_story(2024, 0);
  EXPECT_EQ(alone, sample_story(2024, 0));
  EXPECT_EQ(alone, sample_story(2024, 5));
  EXPECT_NE(alone, sample_story(2025, 0));
}
