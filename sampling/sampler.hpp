// Token sampling: greedy, temperature, top-k, top-p, with a per-request seeded generator.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "sampling/sampling_params.hpp"

namespace conveyor::sampling {

/// Index of the largest value (the first one on ties).
int32_t argmax(const float* logits, int32_t n);

/// The tokens that sampling at a temperature above 0 draws from for one row, after top_k and
/// top_p, with their weights exp((logit - max_logit) / temperature): the one computation both
/// the sampler and the log-probabilities (sampling/logprobs.hpp) use, so that they always agree.
struct candidate_set {
  /// True when every token is kept (no top_k, no top_p): `weights` is then indexed by id and
  /// `candidates` is empty.
  bool all = false;
  /// (logit, id), most likely first (the lower id first on ties); the first `keep` are kept.
  /// With top_k only the first top_k are in order.
  std::vector<std::pair<float, int32_t>> candidates;
  /// Weight of each kept token (by id when `all`, else in the order of `candidates`).
  std::vector<double> weights;
  /// Number of kept tokens.
  size_t keep = 0;
  /// Sum of the kept weights.
  double total = 0.0;
  /// The largest logit of the row.
  float max_logit = 0.0f;
};

/// Fills `set` with the tokens that `params` (temperature > 0, top_k, top_p) keeps from `logits`.
void select_candidates(const float* logits, int32_t vocab, const sampling_params& params,
                       candidate_set& set);

/// Samples tokens for one request. Each request owns one, so sampling never depends on the batch.
class sampler {
 public:
  /// A sampler for a request of `params` (temperature, top_p, top_k; its generator seeded with
  /// `seed`, 0 when absent).
  explicit sampler(const sampling_params& params);

  /// Picks the next token from one row of logits.
  int32_t sample(const float* logits, int32_t vocab);

  const sampling_params& params() const { return params_; }

 private:
  /// A uniform double in [0, 1), the same bits on every platform.
  double uniform();

  sampling_params params_;
  std::mt19937_64 rng_;
  candidate_set set_;
};

}  // namespace conveyor::sampling
