// Logit processing before sampling: OpenAI's presence and frequency penalties, the
// multiplicative repetition penalty of vLLM and transformers, logit_bias and min_tokens.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sampling/sampling_params.hpp"

namespace conveyor::sampling {

/// Processes the logits of one sequence, step by step. It keeps the counts of the generated
/// tokens and the set of tokens seen (prompt and generated) as they come, so a step costs
/// O(distinct tokens seen + bias entries), never O(history). In this order, as vLLM's V1
/// sampler does: logit_bias, min_tokens masking, then the repetition penalty, then
/// `logit -= frequency_penalty * count + presence_penalty * (count > 0)` over generated tokens.
/// One instance per sequence; not thread-safe.
class logit_processor {
 public:
  /// Whether a request of `params` changes any logit (a processor is needed), with
  /// `min_tokens_masked` the ids that cannot be sampled before min_tokens.
  static bool needed(const sampling_params& params, const std::vector<int32_t>& min_tokens_masked);

  /// A processor for a sequence of `params` (its penalties, logit_bias and min_tokens) whose
  /// prompt is `prompt`. While fewer than min_tokens tokens were generated, the
  /// `min_tokens_masked` ids get -inf: the end ids and stop_token_ids, which the caller knows.
  logit_processor(const sampling_params& params, std::vector<int32_t> min_tokens_masked,
                  const std::vector<int32_t>& prompt);

  /// Applies the processing to `row`, the `vocab` logits of the next token, in place.
  void apply(float* row, int32_t vocab) const;

  /// Records that `token` was generated.
  void accept(int32_t token);

  /// Tokens generated so far (accepted).
  int32_t generated() const { return generated_; }

  /// How often `token` was generated.
  int32_t count(int32_t token) const;

  const sampling_params& params() const { return params_; }

 private:
  sampling_params params_;
  /// The ids that cannot be sampled before min_tokens.
  std::vector<int32_t> min_tokens_masked_;
  /// Generated token -> times generated.
  std::unordered_map<int32_t, int32_t> counts_;
  /// Distinct tokens of the prompt and the generated ones (for the repetition penalty).
  std::vector<int32_t> seen_;
  /// Membership of seen_, indexed by id (grown on demand).
  std::vector<bool> is_seen_;
  int32_t generated_ = 0;

  void mark_seen(int32_t token);
};

}  // namespace conveyor::sampling
