// Logit processing against its formulas: OpenAI's presence and frequency penalties over generated
// tokens, the multiplicative repetition penalty over prompt and generated tokens, logit_bias and
// min_tokens masking, with the expected numbers worked out by hand.
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "sampling/logit_processor.hpp"
#include "sampling/sampler.hpp"
#include "tests/support/sampling_params.hpp"

using namespace conveyor;
using namespace conveyor::sampling;
using conveyor::test::sampling_of;

namespace {

std::vector<float> processed(const logit_processor& p, std::vector<float> row) {
  p.apply(row.data(), int32_t(row.size()));
  return row;
}

}  // namespace

TEST(logit_processor, defaults_are_inactive) {
  EXPECT_FALSE(logit_processor::needed(sampling_params{}, {}));
  EXPECT_FALSE(logit_processor::needed(sampling_params{}, {2}));
  sampling_params only_min;
  only_min.min_tokens = 3;  // nothing to mask: nothing to do
  EXPECT_FALSE(logit_processor::needed(only_min, {}));
  EXPECT_TRUE(logit_processor::needed(only_min, {2}));
}

TEST(logit_processor, presence_and_frequency_follow_openai) {
  sampling_params s;
  s.presence_penalty = 0.5f;
  s.frequency_penalty = 0.25f;
  // The prompt does not count for these two.
  logit_processor p{s, {}, {0, 0, 0, 1}};
  const std::vector<float> row{1.0f, 2.0f, -1.0f, 0.5f};
  EXPECT_EQ(processed(p, row), row);
  p.accept(2);
  p.accept(2);
  p.accept(3);
  p.accept(2);
  EXPECT_EQ(p.count(2), 3);
  EXPECT_EQ(p.count(3), 1);
  EXPECT_EQ(p.generated(), 4);
  // logit[t] -= frequency * count(t) + presence * (count(t) > 0)
  auto out = processed(p, row);
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], 2.0f);
  EXPECT_FLOAT_EQ(out[2], -1.0f - (0.25f * 3 + 0.5f));  // -2.25
  EXPECT_FLOAT_EQ(out[3], 0.5f - (0.25f * 1 + 0.5f));   // -0.25
}

TEST(logit_processor, negative_penalties_encourage) {
  sampling_params s;
  s.presence_penalty = -2.0f;
  s.frequency_penalty = -1.0f;
  logit_processor p{s, {}, {}};
  p.accept(1);
  p.accept(1);
  auto out = processed(p, {0.0f, 0.0f});
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[1], 4.0f);  // 0 - (-1 * 2 + -2)
}

TEST(logit_processor, repetition_penalty_divides_positive_and_multiplies_negative) {
  sampling_params s;
  s.repetition_penalty = 2.0f;
  logit_processor p{s, {}, {0, 1, 1}};  // prompt tokens count
  const std::vector<float> row{3.0f, -3.0f, 3.0f, -3.0f, 0.0f};
  auto out = processed(p, row);
  EXPECT_FLOAT_EQ(out[0], 1.5f);
  EXPECT_FLOAT_EQ(out[1], -6.0f);  // applied once, however often the token appeared
  EXPECT_FLOAT_EQ(out[2], 3.0f);
  EXPECT_FLOAT_EQ(out[3], -3.0f);
  p.accept(3);
  p.accept(4);
  out = processed(p, row);
  EXPECT_FLOAT_EQ(out[3], -6.0f);
  EXPECT_FLOAT_EQ(out[4], 0.0f);  // zero stays zero
  EXPECT_FLOAT_EQ(out[2], 3.0f);
}

TEST(logit_processor, penalty_below_one_rewards_repeats) {
  sampling_params s;
  s.repetition_penalty = 0.5f;
  logit_processor p{s, {}, {0, 1}};
  auto out = processed(p, {3.0f, -3.0f});
  EXPECT_FLOAT_EQ(out[0], 6.0f);
  EXPECT_FLOAT_EQ(out[1], -1.5f);
}

TEST(logit_processor, bias_is_added_and_applied_before_the_penalties) {
  sampling_params s;
  s.logit_bias = {{1, 2.5f}, {3, -100.0f}, {99, 5.0f}};  // 99 is outside this row: skipped
  s.repetition_penalty = 2.0f;
  s.frequency_penalty = 1.0f;
  logit_processor p{s, {}, {1}};
  p.accept(3);
  auto out = processed(p, {0.0f, 1.0f, 0.0f, 1.0f});
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[1], (1.0f + 2.5f) / 2.0f);  // bias, then repetition (prompt token)
  // bias, repetition (generated, negative: times 2), frequency and no presence.
  EXPECT_FLOAT_EQ(out[3], (1.0f - 100.0f) * 2.0f - 1.0f);
}

TEST(logit_processor, min_tokens_masks_end_ids_until_reached) {
  sampling_params s;
  s.min_tokens = 2;
  logit_processor p{s, {0, 2}, {}};
  const float inf = std::numeric_limits<float>::infinity();
  auto out = processed(p, {5.0f, 1.0f, 7.0f});
  EXPECT_EQ(out[0], -inf);
  EXPECT_FLOAT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], -inf);
  p.accept(1);
  EXPECT_EQ(processed(p, {5.0f, 1.0f, 7.0f})[2], -inf);
  p.accept(1);
  EXPECT_EQ(processed(p, {5.0f, 1.0f, 7.0f}), (std::vector<float>{5.0f, 1.0f, 7.0f}));
}

TEST(logit_processor, a_bias_of_minus_100_keeps_the_greedy_token_out) {
  // Logits of a realistic spread (a few units): the greedy token loses its place at once, and
  // sampling at temperature 1 with many seeds never draws it.
  std::vector<float> row(64);
  for (size_t i = 0; i < row.size(); ++i) row[i] = float(std::sin(double(i) * 1.7) * 4.0);
  const int32_t greedy = argmax(row.data(), int32_t(row.size()));
  sampling_params s;
  s.logit_bias = {{greedy, -100.0f}};
  logit_processor p{s, {}, {}};
  auto biased = processed(p, row);
  sampler greedy_sampler{sampling_of(0.0f, 1.0f, 0, 0)};
  const int32_t second = greedy_sampler.sample(biased.data(), int32_t(biased.size()));
  EXPECT_NE(second, greedy);
  auto without = row;
  without[size_t(greedy)] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(second, argmax(without.data(), int32_t(without.size())));
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    sampler any{sampling_of(1.0f, 1.0f, 0, seed)};
    ASSERT_NE(any.sample(biased.data(), int32_t(biased.size())), greedy) << "seed " << seed;
  }
  // And a +100 bias makes any token the greedy one.
  sampling_params up;
  up.logit_bias = {{5, 100.0f}};
  auto raised = processed(logit_processor{up, {}, {}}, row);
  EXPECT_EQ(greedy_sampler.sample(raised.data(), int32_t(raised.size())), 5);
}
