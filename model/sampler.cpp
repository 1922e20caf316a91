#include "model/sampler.hpp"

#include <algorithm>
#include <cmath>

namespace conveyor::model {

int32_t argmax(const float* logits, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

sampler::sampler(const sampling_params& params) : params_(params), rng_(params.seed) {}

double sampler::uniform() {
  return static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0);
}

int32_t sampler::sample(const float* logits, int32_t vocab) {
  if (params_.temperature <= 0.0f) return argmax(logits, vocab);
  if (params_.top_k <= 0 && params_.top_p >= 1.0f) {
    // Plain temperature sampling needs no ordering: one pass for the maximum, one for the
    // weights, one to find where the draw falls.
    const float top = logits[argmax(logits, vocab)];
    const double inv_t = 1.0 / params_.temperature;
    probs_.resize(size_t(vocab));
    double total = 0.0;
    for (int32_t i = 0; i < vocab; ++i) total += probs_[i] = std::exp((logits[i] - top) * inv_t);
    const double r = uniform() * total;
    double acc = 0.0;
    for (int32_t i = 0; i < vocab; ++i) {
      acc += probs_[i];
      if (r < acc) return i;
    }
    return vocab - 1;
  }
  // Candidates sorted by logit, most likely first (index breaks ties, for determinism).
  candidates_.resize(static_cast<size_t>(vocab));
  for (int32_t i = 0; i < vocab; ++i) candidates_[i] = {logits[i], i};
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  // Softmax over the kept candidates at this temperature.
  const double inv_t = 1.0 / params_.temperature;
  const double max_logit = candidates_[0].first;
  double total = 0.0;
  probs_.resize(keep);
  auto& probs = probs_;
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp((candidates_[i].first - max_logit) * inv_t);
    total += probs[i];
  }
  // Nucleus: the smallest prefix whose mass reaches top_p.
  if (params_.top_p < 1.0f) {
    double mass = 0.0;
    size_t cut = keep;
    for (size_t i = 0; i < keep; ++i) {
      mass += probs[i] / total;
      if (mass >= params_.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += probs[i];
  }
  const double r = uniform() * total;
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += probs[i];
    if (r < acc) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

}  // namespace conveyor::model
