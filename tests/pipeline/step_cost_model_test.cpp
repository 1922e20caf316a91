// The step cost model: it recovers known linear costs from synthetic step timings, follows a
// change of speed, and stays sensible with terms it has not seen vary.
#include <random>

#include <gtest/gtest.h>

#include "pipeline/step_cost_model.hpp"

using namespace conveyor::pipeline;

namespace {

// A machine whose steps cost exactly these (ms): fixed, per row, per token, per 1000 positions.
struct linear_machine {
  double fixed, row, token, kilo;
  double time(const step_shape& s) const {
    return fixed + row * double(s.decode_rows) + token * double(s.prefill_tokens) +
           kilo * double(s.attended) / 1000.0;
  }
};

// Steps of varied shape, as a continuous executor makes them.
step_shape random_shape(std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> rows(0, 32), tokens(0, 300), position(1, 250);
  step_shape s;
  s.decode_rows = rows(rng);
  s.prefill_tokens = rng() % 3 == 0 ? tokens(rng) : 0;
  if (s.decode_rows == 0 && s.prefill_tokens == 0) s.decode_rows = 1;
  for (int64_t r = 0; r < s.decode_rows; ++r) s.attended += position(rng);
  s.attended += s.prefill_tokens * (s.prefill_tokens + 1) / 2;
  return s;
}

}  // namespace

TEST(step_cost_model, recovers_known_linear_costs) {
  const linear_machine m{1.7, 0.45, 0.12, 0.8};
  step_cost_model model;
  std::mt19937 rng(7);
  for (int i = 0; i < 400; ++i) {
    const auto s = random_shape(rng);
    model.observe(s, m.time(s));
  }
  const auto& c = model.fitted();
  EXPECT_NEAR(c.fixed_ms, 1.7, 1e-3);
  EXPECT_NEAR(c.per_row_ms, 0.45, 1e-4);
  EXPECT_NEAR(c.per_token_ms, 0.12, 1e-4);
  EXPECT_NEAR(c.per_kilo_attended_ms, 0.8, 1e-3);
  EXPECT_EQ(model.samples(), 400);
  // Predictions of shapes it never saw.
  const step_shape big{64, 512, 40000};
  EXPECT_NEAR(model.predict(big), m.time(big), 1e-2);
}

TEST(step_cost_model, recovers_costs_under_noise) {
  const linear_machine m{2.0, 0.3, 0.2, 0.5};
  step_cost_model model{step_cost_options{0.999, 1e-3}};
  std::mt19937 rng(11);
  std::normal_distribution<double> noise(0.0, 0.05);
  for (int i = 0; i < 3000; ++i) {
    const auto s = random_shape(rng);
    model.observe(s, m.time(s) + noise(rng));
  }
  const auto& c = model.fitted();
  EXPECT_NEAR(c.fixed_ms, 2.0, 0.05);
  EXPECT_NEAR(c.per_row_ms, 0.3, 0.01);
  EXPECT_NEAR(c.per_token_ms, 0.2, 0.005);
  EXPECT_NEAR(c.per_kilo_attended_ms, 0.5, 0.05);
}

TEST(step_cost_model, forgets_an_old_speed) {
  const linear_machine slow{4.0, 1.0, 0.4, 1.0}, fast{1.0, 0.25, 0.1, 0.25};
  step_cost_model model;  // forgetting 0.98
  std::mt19937 rng(3);
  for (int i = 0; i < 300; ++i) {
    const auto s = random_shape(rng);
    model.observe(s, slow.time(s));
  }
  EXPECT_NEAR(model.fitted().per_token_ms, 0.4, 1e-3);
  int with_prompts = 0;
  for (int i = 0; i < 1500; ++i) {
    const auto s = random_shape(rng);
    model.observe(s, fast.time(s));
    with_prompts += s.prefill_tokens > 0;
  }
  // A step with prompt tokens is forgotten only as newer such steps come (a third of these):
  // 0.98^500 of the old weight is left, and 0.98^1500 of the old decode-only steps'. The fit is
  // the new machine's.
  ASSERT_GT(with_prompts, 450);
  EXPECT_NEAR(model.fitted().fixed_ms, 1.0, 1e-3);
  EXPECT_NEAR(model.fitted().per_token_ms, 0.1, 1e-4);
}

TEST(step_cost_model, empty_predicts_zero_and_unseen_terms_stay_zero) {
  step_cost_model model;
  EXPECT_EQ(model.predict({16, 100, 5000}), 0.0);
  // Only pure decode steps of 4 rows: the prompt-token cost is unknown and stays 0, while the
  // decode step is predicted exactly.
  for (int i = 0; i < 50; ++i) model.observe({4, 0, 400 + 4 * i}, 3.0 + 0.001 * (400 + 4 * i));
  EXPECT_EQ(model.fitted().per_token_ms, 0.0);
  EXPECT_NEAR(model.predict({4, 0, 500}), 3.5, 1e-3);
  EXPECT_NEAR(model.predict({4, 0, 500}), model.predict({4, 300, 500}), 1e-9);
}

TEST(step_cost_model, never_fits_a_negative_cost) {
  // Steps that get faster with more rows (noise, or a machine whose load fell): the per-row
  // cost is read as 0, not negative, and the fit of the rest stays non-negative.
  step_cost_model model;
  for (int i = 0; i < 100; ++i) {
    const int64_t rows = 1 + i % 8;
    model.observe({rows, 0, rows * 10}, 5.0 - 0.1 * double(rows));
  }
  const auto& c = model.fitted();
  EXPECT_GE(c.fixed_ms, 0.0);
  EXPECT_EQ(c.per_row_ms, 0.0);
  EXPECT_GE(c.per_kilo_attended_ms, 0.0);
  EXPECT_GE(model.predict({100, 0, 0}), 0.0);
  // Bad timings are ignored.
  model.observe({1, 0, 1}, -1.0);
  model.observe({1, 0, 1}, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(model.samples(), 100);
}
