// Logit processing before sampling: OpenAI's presence and frequency penalties, the
// multiplicative repetition penalty of vLLM and transformers, logit_bias and min_tokens.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/sampling.hpp"

namespace conveyor::sampling {

/// What one request asks of logit processing. The defaults change nothing.
struct logit_settings {
  /// Subtracted once from the logit of every token generated so far.
  float presence_penalty = 0;
  /// Subtracted from a token's logit once per time it was generated.
  float frequency_penalty = 0;
  /// Over tokens of the prompt and generated ones: a positive logit is divided by it, a negative
  /// one multiplied; 1 is off.
  float repetition_penalty = 1;
  /// Added to the logits of these tokens (ids outside the row are skipped).
  std::vector<token_bias> logit_bias;
  /// While fewer tokens than this were generated, the `min_tokens_masked` ids get -inf.
  int32_t min_tokens = 0;
  /// The ids that cannot be sampled before min_tokens: the end ids and stop_token_ids.
  std::vector<int32_t> min_tokens_masked;

  /// Whether these settings change any logit (a processor is needed).
  bool active() const;
};

/// Processes the logits of one sequence, step by step. It keeps the counts of the generated
/// tokens and the set of tokens seen (prompt and generated) as they come, so a step costs
/// O(distinct tokens seen + bias entries), never O(history). In this order, as vLLM's V1
/// sampler does: logit_bias, min_tokens masking, then the repetition penalty, then
/// `logit -= frequency_penalty * count + presence_penalty * (count > 0)` over generated tokens.
/// One instance per sequence; not thread-safe.
class logit_processor {
 public:
  /// A processor for a sequence whose prompt is `prompt`.
  logit_processor(logit_settings settings, const std::vector<int32_t>& prompt);

  /// Applies the settings to `row`, the `vocab` logits of the next token, in place.
  void apply(float* row, int32_t vocab) const;

  /// Records that `token` was generated.
  void accept(int32_t token);

  /// Tokens generated so far (accepted).
  int32_t generated() const { return generated_; }

  /// How often `token` was generated.
  int32_t count(int32_t token) const;

  const logit_settings& settings() const { return settings_; }

 private:
  logit_settings settings_;
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
