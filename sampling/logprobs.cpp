// Log-probabilities from a row of logits, sharing the sampler's choice of candidates.
#include "sampling/logprobs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace conveyor::sampling {

namespace {

// (logit, id) order: higher logit first, the lower id first on ties, as the sampler orders.
bool before(float la, int32_t a, float lb, int32_t b) {
  return la > lb || (la == lb && a < b);
}

// The ids of the `n` highest logits of `row`, in order.
std::vector<int32_t> best_ids(const float* row, int32_t vocab, int32_t n) {
  n = std::max(0, std::min(n, vocab));
  std::vector<int32_t> ids;
  ids.reserve(size_t(n) + 1);
  // One pass with a small sorted list: n is at most 20.
  for (int32_t i = 0; i < vocab; ++i) {
    if (int32_t(ids.size()) == n && (n == 0 || !before(row[i], i, row[ids.back()], ids.back())))
      continue;
    auto at = std::find_if(ids.begin(), ids.end(),
                           [&](int32_t j) { return before(row[i], i, row[j], j); });
    ids.insert(at, i);
    if (int32_t(ids.size()) > n) ids.pop_back();
  }
  return ids;
}

}  // namespace

token_scores raw_logprobs(const float* row, int32_t vocab, int32_t token, int32_t top_n) {
  const double top = row[argmax(row, vocab)];
  double sum = 0.0;
  for (int32_t i = 0; i < vocab; ++i) sum += std::exp(double(row[i]) - top);
  const double log_z = top + std::log(sum);
  auto score = [&](int32_t id) { return scored_token{id, float(double(row[id]) - log_z)}; };
  token_scores out;
  out.chosen = score(token);
  for (auto id : best_ids(row, vocab, top_n)) out.top.push_back(score(id));
  return out;
}

token_scores sampled_logprobs(const float* row, int32_t vocab, const sampling_params& params,
                              int32_t token, int32_t top_n) {
  if (params.temperature <= 0.0f) return raw_logprobs(row, vocab, token, top_n);
  candidate_set set;
  select_candidates(row, vocab, params, set);
  const double inv_t = 1.0 / params.temperature;
  const double log_total = std::log(set.total);
  // Kept tokens: log(weight / total), with the weight's exponent taken as the sampler computes it.
  auto kept_score = [&](float logit) {
    return float((double(logit) - double(set.max_logit)) * inv_t - log_total);
  };
  constexpr float excluded = -std::numeric_limits<float>::infinity();
  token_scores out;
  const auto best = best_ids(row, vocab, top_n);
  if (set.all) {
    out.chosen = {token, kept_score(row[token])};
    for (auto id : best) out.top.push_back({id, kept_score(row[id])});
    return out;
  }
  // The kept tokens are the first `keep` candidates, which are the best by (logit, id): a token
  // is kept when it is no worse than the last kept one.
  const auto& last = set.candidates[set.keep - 1];
  auto score = [&](int32_t id) {
    const bool kept = !before(last.first, last.second, row[id], id);
    return scored_token{id, kept ? kept_score(row[id]) : excluded};
  };
  out.chosen = score(token);
  for (auto id : best) out.top.push_back(score(id));
  return out;
}

}  // namespace conveyor::sampling
