#include "sampling/sampler.hpp"

#include <algorithm>
#include <cmath>

namespace conveyor::sampling {

int32_t argmax(const float* logits, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

void select_candidates(const float* logits, int32_t vocab, const sampling_params& params,
                       candidate_set& set) {
  const double inv_t = 1.0 / params.temperature;
  set.candidates.clear();
  if (params.top_k <= 0 && params.top_p >= 1.0f) {
    // Plain temperature sampling needs no ordering: one pass for the maximum, one for the
    // weights.
    set.all = true;
    set.max_logit = logits[argmax(logits, vocab)];
    set.weights.resize(size_t(vocab));
    double total = 0.0;
    for (int32_t i = 0; i < vocab; ++i)
      total += set.weights[i] = std::exp((logits[i] - set.max_logit) * inv_t);
    set.keep = size_t(vocab);
    set.total = total;
    return;
  }
  set.all = false;
  // Candidates sorted by logit, most likely first (index breaks ties, for determinism).
  auto& candidates = set.candidates;
  candidates.resize(static_cast<size_t>(vocab));
  for (int32_t i = 0; i < vocab; ++i) candidates[i] = {logits[i], i};
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates.size();
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < keep) {
    keep = static_cast<size_t>(params.top_k);
    std::partial_sort(candidates.begin(), candidates.begin() + keep, candidates.end(), by_logit);
  } else {
    std::sort(candidates.begin(), candidates.end(), by_logit);
  }
  // Softmax over the kept candidates at this temperature.
  set.max_logit = candidates[0].first;
  const double max_logit = set.max_logit;
  double total = 0.0;
  auto& probs = set.weights;
  probs.resize(keep);
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp((candidates[i].first - max_logit) * inv_t);
    total += probs[i];
  }
  // Nucleus: the smallest prefix whose mass reaches top_p.
  if (params.top_p < 1.0f) {
    double mass = 0.0;
    size_t cut = keep;
    for (size_t i = 0; i < keep; ++i) {
      mass += probs[i] / total;
      if (mass >= params.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += probs[i];
  }
  set.keep = keep;
  set.total = total;
}

sampler::sampler(const sampling_params& params) : params_(params), rng_(params.seed.value_or(0)) {}

double sampler::uniform() {
  return static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0);
}

int32_t sampler::sample(const float* logits, int32_t vocab) {
  if (params_.temperature <= 0.0f) return argmax(logits, vocab);
  select_candidates(logits, vocab, params_, set_);
  const double r = uniform() * set_.total;
  double acc = 0.0;
  for (size_t i = 0; i < set_.keep; ++i) {
    acc += set_.weights[i];
    if (r < acc) return set_.all ? int32_t(i) : set_.candidates[i].second;
  }
  return set_.all ? int32_t(set_.keep - 1) : set_.candidates[set_.keep - 1].second;
}

}  // namespace conveyor::sampling
