// Token sampling: greedy, temperature, top-k, top-p, with a per-request seeded generator.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "common/sampling.hpp"

namespace conveyor::sampling {

/// How one request picks its next token.
struct sampling_params {
  /// 0 means greedy (argmax); otherwise logits are divided by it before the softmax.
  float temperature = sampling_defaults{}.temperature;
  /// Nucleus sampling: keep the smallest set of tokens whose probability reaches top_p (1 = all).
  float top_p = sampling_defaults{}.top_p;
  /// Keep only the top_k most likely tokens (0 = all).
  int32_t top_k = sampling_defaults{}.top_k;
  /// Seed of this request's generator: the same seed gives the same tokens, whatever else
  /// shares the batch.
  uint64_t seed = 0;
};

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

/// Fills `set` with the tokens that `params` (temperature > 0) keeps from `logits`.
void select_candidates(const float* logits, int32_t vocab, const sampling_params& params,
                       candidate_set& set);

/// Samples tokens for one request. Each request owns one, so sampling never depends on the batch.
class sampler {
 public:
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
