// Log-probabilities of tokens under the distribution a request samples from: the chosen token's
// and the most likely alternatives', for the `logprobs` of OpenAI's APIs.
#pragma once

#include <cstdint>
#include <vector>

#include "sampling/sampler.hpp"

namespace conveyor::sampling {

/// The most alternatives a request may ask for (OpenAI's limit).
inline constexpr int32_t max_top_logprobs = 20;

/// A token with its log-probability; -infinity for a token the distribution excludes (outside
/// top_k or top_p), NaN where there is none (the first token of a prompt).
struct scored_token {
  int32_t id = 0;
  float logprob = 0.0f;
};

/// One position's log-probabilities: the token there and the `top_n` most likely tokens, most
/// likely first (the lower id first on ties).
struct token_scores {
  scored_token chosen;
  std::vector<scored_token> top;
};

/// log_softmax of `row` in double precision: the distribution at temperature 0, and that of the
/// raw model for prompt tokens. Scores `token` and the `top_n` (<= max_top_logprobs) best.
token_scores raw_logprobs(const float* row, int32_t vocab, int32_t token, int32_t top_n);

/// The log-probabilities of the distribution `params` samples from `row`: at temperature 0 (the
/// argmax), log_softmax(row); above, log_softmax(row / temperature) over the tokens top_k and
/// top_p keep (select_candidates, exactly as the sampler draws), renormalised, the others
/// -infinity. Scores `token` and the `top_n` (<= max_top_logprobs) tokens of the highest logit.
token_scores sampled_logprobs(const float* row, int32_t vocab, const sampling_params& params,
                              int32_t token, int32_t top_n);

}  // namespace conveyor::sampling
