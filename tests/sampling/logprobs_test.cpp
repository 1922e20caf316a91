// Log-probabilities of the distribution sampled from: log_softmax at temperature 0, the
// renormalised distribution over what top_k/top_p keep above, and agreement with the sampler.
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "model/causal_lm.hpp"
#include "model/slot_tables.hpp"
#include "sampling/logprobs.hpp"
#include "sampling/sampler.hpp"
#include "tests/support/model_files.hpp"
#include "tests/support/sampling_params.hpp"

using namespace conveyor::sampling;
using conveyor::test::sampling_of;
using namespace conveyor::model;

namespace {

// log_softmax(row / t) in long double, written out from the definition.
std::vector<double> reference_log_softmax(const std::vector<float>& row, double t = 1.0) {
  long double z = 0;
  for (float x : row) z += std::exp((long double)x / t);
  std::vector<double> out;
  for (float x : row) out.push_back(double((long double)x / t - std::log(z)));
  return out;
}

constexpr float minus_inf = -std::numeric_limits<float>::infinity();

}  // namespace

TEST(logprobs, temperature_zero_is_log_softmax_of_the_row) {
  std::vector<float> row{0.5f, -1.25f, 3.0f, 2.0f, 3.0f, -7.0f};
  auto ref = reference_log_softmax(row);
  auto s = sampled_logprobs(row.data(), 6, sampling_of(0.0f, 1.0f, 0, 1), 1, 4);
  EXPECT_EQ(s.chosen.id, 1);
  EXPECT_NEAR(s.chosen.logprob, ref[1], 1e-6);
  // Most likely first, the lower id first on the tie of 2 and 4.
  ASSERT_EQ(s.top.size(), 4u);
  const int32_t order[] = {2, 4, 3, 0};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(s.top[i].id, order[i]);
    EXPECT_NEAR(s.top[i].logprob, ref[order[i]], 1e-6);
  }
  // Large logits do not overflow.
  std::vector<float> big{1000.0f, 999.0f};
  auto b = raw_logprobs(big.data(), 2, 0, 0);
  EXPECT_NEAR(b.chosen.logprob, -std::log1p(std::exp(-1.0)), 1e-6);
  EXPECT_TRUE(b.top.empty());
}

TEST(logprobs, temperature_scales_the_logits) {
  std::vector<float> row{0.5f, -1.25f, 3.0f, 2.0f};
  auto ref = reference_log_softmax(row, 0.7);
  auto s = sampled_logprobs(row.data(), 4, sampling_of(0.7f, 1.0f, 0, 1), 3, 20);
  EXPECT_NEAR(s.chosen.logprob, ref[3], 1e-6);
  ASSERT_EQ(s.top.size(), 4u);  // no more than the vocabulary
  for (const auto& t : s.top) EXPECT_NEAR(t.logprob, ref[t.id], 1e-6);
}

TEST(logprobs, top_k_renormalises_over_the_kept_tokens) {
  std::vector<float> row{1.0f, 4.0f, 3.0f, 0.0f, 2.0f};
  // top_k 2 keeps 1 and 2: probabilities e^4/(e^4+e^3), e^3/(e^4+e^3) at temperature 1.
  auto s = sampled_logprobs(row.data(), 5, sampling_of(1.0f, 1.0f, 2, 1), 2, 3);
  const double log_z = std::log(std::exp(4.0) + std::exp(3.0));
  EXPECT_NEAR(s.chosen.logprob, 3.0 - log_z, 1e-6);
  ASSERT_EQ(s.top.size(), 3u);
  EXPECT_EQ(s.top[0].id, 1);
  EXPECT_NEAR(s.top[0].logprob, 4.0 - log_z, 1e-6);
  EXPECT_EQ(s.top[1].id, 2);
  EXPECT_EQ(s.top[2].id, 4);
  EXPECT_EQ(s.top[2].logprob, minus_inf);
  EXPECT_EQ(sampled_logprobs(row.data(), 5, sampling_of(1.0f, 1.0f, 2, 1), 3, 0).chosen.logprob,
            minus_inf);
}

TEST(logprobs, top_p_renormalises_over_the_nucleus) {
  // Probabilities 0.6, 0.3, 0.1 at temperature 1: top_p 0.8 keeps the first two.
  std::vector<float> row{std::log(0.3f), std::log(0.1f), std::log(0.6f)};
  auto s = sampled_logprobs(row.data(), 3, sampling_of(1.0f, 0.8f, 0, 1), 0, 3);
  EXPECT_NEAR(s.chosen.logprob, std::log(0.3 / 0.9), 1e-6);
  ASSERT_EQ(s.top.size(), 3u);
  EXPECT_EQ(s.top[0].id, 2);
  EXPECT_NEAR(s.top[0].logprob, std::log(0.6 / 0.9), 1e-6);
  EXPECT_EQ(s.top[1].id, 0);
  EXPECT_EQ(s.top[2].id, 1);
  EXPECT_EQ(s.top[2].logprob, minus_inf);
  // top_k and top_p together, at temperature 2: top_k 3 of 4, then the nucleus of those.
  std::vector<float> four{2.0f, 0.0f, 1.0f, -3.0f};
  auto both = sampled_logprobs(four.data(), 4, sampling_of(2.0f, 0.5f, 3, 1), 0, 4);
  // At temperature 2 the three kept have weights e^1, e^0.5, e^0: the first alone has
  // e/(e+e^.5+1) = 0.506 >= 0.5, so it alone is kept, with probability 1.
  EXPECT_NEAR(both.chosen.logprob, 0.0, 1e-7);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(both.top[i].logprob, minus_inf);
}

TEST(logprobs, agree_with_what_the_sampler_draws) {
  // Every token the sampler draws is kept, and its frequency follows exp(logprob).
  std::vector<float> row;
  for (int i = 0; i < 40; ++i) row.push_back(float(std::sin(i * 1.7) * 3.0));
  for (auto params : {sampling_of(0.8f, 1.0f, 0, 5), sampling_of(1.3f, 1.0f, 7, 6),
                      sampling_of(1.0f, 0.7f, 0, 7), sampling_of(0.9f, 0.9f, 10, 8)}) {
    sampler s(params);
    std::map<int32_t, int> counts;
    const int draws = 40000;
    for (int i = 0; i < draws; ++i) ++counts[s.sample(row.data(), 40)];
    double mass = 0;
    for (int32_t id = 0; id < 40; ++id) {
      const float lp = sampled_logprobs(row.data(), 40, params, id, 0).chosen.logprob;
      if (lp == minus_inf) {
        EXPECT_EQ(counts.count(id), 0u) << "token " << id << " drawn but excluded";
        continue;
      }
      mass += std::exp(double(lp));
      // Binomial standard deviation at most 0.0025 here: 5 sigma.
      EXPECT_NEAR(double(counts[id]) / draws, std::exp(double(lp)), 0.0125) << "token " << id;
    }
    EXPECT_NEAR(mass, 1.0, 1e-6);
  }
}

namespace {

struct network_case {
  const char* name;
  llama_network network;
  compute_dtype dtype;
  double tolerance;
};

}  // namespace

// A prefill item with all_logits returns, in order, the rows that prefills of its prefixes would
// return last (bf16 within a few of its steps at these logits' size, up to 16): on both networks
// and in bf16, with the other items' rows where they belong, and
// with more rows than one forward pass holds (a context of 24 makes passes of 24 rows), which
// then come from a buffer of their own.
TEST(all_logits, every_row_is_the_last_row_of_the_prefix_up_to_it) {
  for (const auto& nc : {network_case{"loops", llama_network::loops, compute_dtype::f32, 1e-4},
                         network_case{"torch_ops", llama_network::torch_ops, compute_dtype::f32,
                                      1e-4},
                         network_case{"torch_ops bf16", llama_network::torch_ops,
                                      compute_dtype::bf16, 0.5}}) {
    SCOPED_TRACE(nc.name);
    runtime_options opt;
    opt.slots = 4;
    opt.context = 24;
    opt.max_batched_tokens = 1;
    opt.network = nc.network;
    opt.dtype = nc.dtype;
    auto m = load_model(conveyor::test::stories_model(), opt);
    ASSERT_TRUE(m) << conveyor::message_of(m.error());
    const std::vector<int32_t> a{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421};
    const std::vector<int32_t> b{1, 403, 409, 261, 384, 326, 295, 375, 361, 277, 287};
    const std::vector<int32_t> c{1, 432};
    // a and b: every row; c: its last. 13 + 11 + 1 = 25 rows, more than a pass's 24, from two
    // passes (a and b, then c).
    const slot_tables tables(**m);
    std::vector<prefill_item> items{{tables[0], 0, a.data(), int32_t(a.size()), -1, true},
                                    {tables[1], 0, b.data(), int32_t(b.size()), -1, true},
                                    {tables[2], 0, c.data(), int32_t(c.size()), -1, false}};
    auto view = (*m)->prefill(items);
    ASSERT_EQ(view.rows, int32_t(a.size() + b.size() + 1));
    const int32_t vocab = view.vocab;
    std::vector<std::vector<float>> rows;
    for (int32_t r = 0; r < view.rows; ++r) rows.emplace_back(view.row(r), view.row(r) + vocab);
    // The largest difference between `got` and the last row of a prefill of ids[0..n).
    auto distance = [&](const std::vector<int32_t>& ids, size_t n, const std::vector<float>& got) {
      auto single = (*m)->prefill({{tables[3], 0, ids.data(), int32_t(n), -1, false}});
      double worst = 0;
      for (int32_t v = 0; v < vocab; ++v)
        worst = std::max(worst, double(std::abs(single.row(0)[v] - got[size_t(v)])));
      return worst;
    };
    auto expect_prefix = [&](const std::vector<int32_t>& ids, size_t n,
                             const std::vector<float>& got) {
      EXPECT_LE(distance(ids, n, got), nc.tolerance) << "prefix of " << n;
      // The tolerance tells rows apart: the next position's row is far from this one.
      if (n < ids.size()) {
        EXPECT_GT(distance(ids, n + 1, got), 4 * nc.tolerance) << n;
      }
    };
    for (size_t t = 0; t < a.size(); ++t) expect_prefix(a, t + 1, rows[t]);
    for (size_t t = 0; t < b.size(); ++t) expect_prefix(b, t + 1, rows[a.size() + t]);
    expect_prefix(c, c.size(), rows[a.size() + b.size()]);
  }
}
