// The step planner, driven with fake costs: decode rows are always in a step, prompt chunks stay
// within the budget, a long prompt completes over several steps, and every prompt gets done.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "pipeline/step_planner.hpp"

using namespace conveyor::pipeline;

namespace {

// A cost model that has learnt: 2 ms fixed, 0.5 ms per row, 0.1 ms per prompt token,
// 1 ms per 1000 attended positions (fitted from exact timings of varied steps).
step_cost_model fake_costs(double fixed = 2.0, double row = 0.5, double token = 0.1,
                           double kilo = 1.0) {
  step_cost_model m{step_cost_options{1.0, 1e-9}};
  auto time = [&](const step_shape& s) {
    return fixed + row * double(s.decode_rows) + token * double(s.prefill_tokens) +
           kilo * double(s.attended) / 1000.0;
  };
  for (int64_t rows : {0, 1, 4, 9, 16})
    for (int64_t tokens : {0, 10, 64, 200})
      for (int64_t att : {0, 300, 2000}) {
        if (rows == 0 && tokens == 0) continue;
        step_shape s{rows, tokens, att + tokens * 7};
        m.observe(s, time(s));
      }
  return m;
}

}  // namespace

TEST(step_planner, attended_by_counts_each_tokens_positions) {
  EXPECT_EQ(step_planner::attended_by(0, 1), 1);
  EXPECT_EQ(step_planner::attended_by(0, 4), 1 + 2 + 3 + 4);
  EXPECT_EQ(step_planner::attended_by(10, 3), 11 + 12 + 13);
  EXPECT_EQ(step_planner::attended_by(5, 0), 0);
}

TEST(step_planner, with_nothing_decoding_prompts_fill_the_token_cap) {
  const auto costs = fake_costs();
  step_plan_options o;
  o.max_prompt_tokens = 100;
  step_planner planner{o};
  const auto plan = planner.plan(0, 0, {{30, 0}, {50, 0}, {60, 0}}, costs);
  EXPECT_TRUE(std::isinf(plan.target_ms));
  ASSERT_EQ(plan.chunks.size(), 3u);
  EXPECT_EQ(plan.prompt_tokens, 100);
  EXPECT_EQ(plan.chunks[0].count, 30);
  EXPECT_TRUE(plan.chunks[0].last);
  EXPECT_EQ(plan.chunks[1].count, 50);
  EXPECT_TRUE(plan.chunks[1].last);
  // The third starts with what is left of the cap.
  EXPECT_EQ(plan.chunks[2].index, 2u);
  EXPECT_EQ(plan.chunks[2].start, 0);
  EXPECT_EQ(plan.chunks[2].count, 20);
  EXPECT_FALSE(plan.chunks[2].last);
}

TEST(step_planner, prompt_chunks_stay_within_the_budget) {
  const auto costs = fake_costs();
  step_plan_options o;
  o.target_ratio = 1.5;
  o.min_prompt_tokens = 1;
  step_planner planner{o};
  // 8 rows at positions summing to 800: decode alone 2 + 4 + 0.8 = 6.8 ms; with one prompt
  // waiting the target is 6.8 x (1 + 0.5 x 9 / 8) = 10.625 ms, which leaves 3.825 ms. A new
  // prompt's k tokens cost 0.1 k + k (k + 1) / 2000 ms: 3.728 at k = 32, 3.861 at k = 33.
  const auto plan = planner.plan(8, 800, {{500, 0}}, costs);
  EXPECT_NEAR(plan.decode_ms, 6.8, 1e-6);
  EXPECT_NEAR(plan.target_ms, 10.625, 1e-6);
  ASSERT_EQ(plan.chunks.size(), 1u);
  const int64_t k = plan.chunks[0].count;
  EXPECT_EQ(k, 32);
  auto predicted = [&](int64_t n) {
    return costs.predict({8, n, 800 + step_planner::attended_by(0, n)});
  };
  EXPECT_LE(predicted(k), plan.target_ms + 1e-9);
  EXPECT_GT(predicted(k + 1), plan.target_ms);
  EXPECT_FALSE(plan.chunks[0].last);
  EXPECT_NEAR(plan.predicted_ms, predicted(k), 1e-9);
  // An absolute target instead of the ratio.
  o.target_ms = 7.8;
  const auto fixed = step_planner{o}.plan(8, 800, {{500, 0}}, costs);
  EXPECT_EQ(fixed.target_ms, 7.8);
  EXPECT_LE(fixed.predicted_ms, 7.8 + 1e-9);
  EXPECT_LT(fixed.prompt_tokens, k);
  EXPECT_GT(fixed.prompt_tokens, 0);
}

TEST(step_planner, decode_rows_are_always_scheduled_and_the_floor_keeps_prompts_moving) {
  // A budget too small for any prompt token: the step still takes min_prompt_tokens of it.
  const auto costs = fake_costs(2.0, 0.5, 5.0, 1.0);
  step_plan_options o;
  o.target_ratio = 1.0;
  o.min_prompt_tokens = 4;
  const auto plan = step_planner{o}.plan(16, 3000, {{3, 0}, {10, 0}}, costs);
  EXPECT_NEAR(plan.decode_ms, 2.0 + 8.0 + 3.0, 1e-6);
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].count, 3);
  EXPECT_TRUE(plan.chunks[0].last);
  EXPECT_EQ(plan.chunks[1].count, 1);
  EXPECT_EQ(plan.prompt_tokens, 4);
}

TEST(step_planner, the_token_cap_bounds_every_step) {
  const auto costs = fake_costs(0, 0, 0, 0);  // free steps: only the cap limits
  step_plan_options o;
  o.max_prompt_tokens = 7;
  o.min_prompt_tokens = 16;  // above the cap: the cap wins
  const auto plan = step_planner{o}.plan(3, 30, {{100, 0}}, costs);
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].count, 7);
}

TEST(step_planner, a_long_prompt_completes_over_several_steps_and_none_starves) {
  const auto costs = fake_costs();
  step_plan_options o;
  o.target_ratio = 1.3;
  o.min_prompt_tokens = 2;
  step_planner planner{o};
  // Prompts arrive while 12 sequences decode; run steps until every prompt is prefilled.
  std::vector<waiting_prompt> prompts{{700, 0}, {5, 0}, {120, 0}, {1, 0}, {333, 0}};
  std::vector<int> chunks_of(prompts.size(), 0);
  std::vector<int> done_at(prompts.size(), -1);
  int64_t position_sum = 12 * 40;
  int steps = 0;
  for (; steps < 10000; ++steps) {
    std::vector<waiting_prompt> waiting;
    std::vector<size_t> which;
    for (size_t i = 0; i < prompts.size(); ++i)
      if (prompts[i].done < prompts[i].length) {
        waiting.push_back(prompts[i]);
        which.push_back(i);
      }
    if (waiting.empty()) break;
    const auto plan = planner.plan(12, position_sum, waiting, costs);
    ASSERT_FALSE(plan.chunks.empty()) << "step " << steps << ": no progress";
    EXPECT_LE(plan.predicted_ms, std::max(plan.target_ms, plan.decode_ms + 2 * 0.1 + 2.0));
    size_t previous = 0;
    for (const auto& c : plan.chunks) {
      auto& p = prompts[which[c.index]];
      // First come, first served: chunks follow the prompts' order, each continues its prompt.
      EXPECT_GE(c.index, previous);
      previous = c.index;
      EXPECT_EQ(c.start, p.done);
      EXPECT_GT(c.count, 0);
      p.done += c.count;
      EXPECT_EQ(c.last, p.done == p.length);
      ++chunks_of[which[c.index]];
      if (c.last) done_at[which[c.index]] = steps;
    }
    position_sum += 12;
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(prompts[i].done, prompts[i].length) << "prompt " << i;
    EXPECT_GE(done_at[i], 0) << "prompt " << i;
  }
  // The 700-token prompt took several steps; later prompts finished after it (served in order).
  EXPECT_GT(chunks_of[0], 5);
  for (size_t i = 1; i < prompts.size(); ++i) EXPECT_GE(done_at[i], done_at[0]);
}

TEST(step_planner, an_empty_model_gives_the_whole_cap) {
  // Before any step was measured every cost is 0: prompts go up to the cap, and the first step
  // measured teaches the model what they cost.
  step_cost_model empty;
  step_plan_options o;
  o.max_prompt_tokens = 256;
  const auto plan = step_planner{o}.plan(5, 100, {{300, 0}}, empty);
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].count, 256);
}

TEST(step_planner, more_waiting_prompts_widen_the_budget_fewer_running_ones_too) {
  const auto costs = fake_costs();
  step_plan_options o;
  o.target_ratio = 1.25;
  o.min_prompt_tokens = 1;
  o.max_prompt_tokens = 100000;
  step_planner planner{o};
  const std::vector<waiting_prompt> one(1, {1000, 0}), many(31, {1000, 0});
  // One prompt beside 16 running sequences: the step may take 1 + 0.25 x 17 / 16 decode steps.
  const auto a = planner.plan(16, 1600, one, costs);
  EXPECT_NEAR(a.target_ms, a.decode_ms * (1 + 0.25 * 17 / 16), 1e-9);
  // 31 prompts beside one running sequence: 1 + 0.25 x 32 = 9 decode steps.
  const auto b = planner.plan(1, 100, many, costs);
  EXPECT_NEAR(b.target_ms, b.decode_ms * 9, 1e-9);
  // 31 prompts beside 16 running: more than one prompt's share, less than beside one running.
  const auto c = planner.plan(16, 1600, many, costs);
  EXPECT_NEAR(c.target_ms, c.decode_ms * (1 + 0.25 * 47 / 16), 1e-9);
  EXPECT_GT(c.prompt_tokens, a.prompt_tokens);
  for (const auto* plan : {&a, &b, &c}) EXPECT_LE(plan->predicted_ms, plan->target_ms + 1e-9);
  // A ratio of 1 leaves prompts nothing but the floor, however many wait.
  o.target_ratio = 1.0;
  o.min_prompt_tokens = 3;
  EXPECT_EQ(step_planner{o}.plan(1, 100, many, costs).prompt_tokens, 3);
}

// A long generation alone (1,500 decode-only steps) after a burst of prompts: the cost model
// still knows what a prompt token costs, so a long prompt that arrives then is given only what
// keeps the running stream's step near its target, on the machine's real costs.
TEST(step_planner, a_long_decode_alone_does_not_make_prompt_tokens_free) {
  const double fixed = 2.0, row = 0.5, token = 0.1, kilo = 0.2;
  auto real_ms = [&](const step_shape& s) {
    return fixed + row * double(s.decode_rows) + token * double(s.prefill_tokens) +
           kilo * double(s.attended) / 1000.0;
  };
  step_cost_model costs;  // the executor's settings: forgetting 0.98, ridge 1e-3
  step_planner planner;
  // A burst: eight prompts of 300 tokens prefilled in chunks beside a growing running set.
  std::vector<waiting_prompt> waiting(8, waiting_prompt{300, 0});
  std::vector<int64_t> positions;
  while (!waiting.empty()) {
    int64_t attended = 0;
    for (int64_t p : positions) attended += p + 1;
    const auto plan = planner.plan(int64_t(positions.size()), attended, waiting, costs);
    step_shape shape{int64_t(positions.size()), plan.prompt_tokens, attended};
    for (const auto& c : plan.chunks) shape.attended += step_planner::attended_by(c.start, c.count);
    costs.observe(shape, real_ms(shape));
    for (int64_t& p : positions) ++p;
    for (const auto& c : plan.chunks) waiting[c.index].done = c.start + c.count;
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (it->done == it->length) {
        positions.push_back(it->length);
        it = waiting.erase(it);
      } else {
        ++it;
      }
    }
  }
  ASSERT_NEAR(costs.fitted().per_token_ms, token, 0.01);
  // All but one end; that one generates 1,500 tokens alone.
  int64_t position = positions.front();
  for (int i = 0; i < 1500; ++i, ++position) {
    const step_shape decode{1, 0, position + 1};
    costs.observe(decode, real_ms(decode));
  }
  EXPECT_NEAR(costs.fitted().per_token_ms, token, 0.01);
  // A 2,000-token prompt arrives.
  const auto plan = planner.plan(1, position + 1, {{2000, 0}}, costs);
  ASSERT_EQ(plan.chunks.size(), 1u);
  step_shape planned{1, plan.prompt_tokens,
                     position + 1 + step_planner::attended_by(0, plan.prompt_tokens)};
  const double decode_ms = real_ms({1, 0, position + 1});
  const double target_ms = decode_ms * (1.0 + 0.25 * 2.0);  // target_ratio 1.25, one prompt
  const double floor_ms = real_ms({1, 16, position + 1 + step_planner::attended_by(0, 16)});
  EXPECT_LE(real_ms(planned), 1.1 * std::max(target_ms, floor_ms))
      << plan.prompt_tokens << " prompt tokens granted";
}
