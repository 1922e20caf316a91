// The sampling of one sequence: logit processing, the seeded sampler and the log-probabilities
// of the distribution it draws from.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "pipeline/request.hpp"
#include "sampling/logit_processor.hpp"
#include "sampling/logprobs.hpp"
#include "sampling/sampler.hpp"

namespace conveyor::pipeline {

/// A token picked from a row of logits.
struct sampled_token {
  int32_t token = 0;
  /// Its log-probabilities under the distribution it was drawn from, when the sequence asks
  /// for them.
  std::optional<sampling::token_scores> scores;
};

/// Picks the tokens of one sequence, one row of logits at a time: logit processing (penalties,
/// bias, min_tokens) on a copy of the row, then the sampler with the sequence's own generator,
/// so that what it picks never depends on the batch. One instance per sequence; only the
/// executor's thread touches it.
class token_sampler {
 public:
  /// A sampler drawing as `params` says, after the logit processing `params` asks for (none
  /// when it changes nothing: rows are then not copied), for a sequence whose prompt is
  /// `prompt` (the repetition penalty counts its tokens) and which ends on `end_ids` (min_tokens
  /// keeps them from being sampled). With `params.logprobs` 0 or more, each pick comes with its
  /// log-probability and that many alternatives (at most max_top_logprobs).
  token_sampler(const sampling::sampling_params& params, const std::vector<int32_t>& prompt,
                const std::vector<int32_t>& end_ids);

  /// Picks the next token from `logits`, the row of `vocab` logits after the sequence's last
  /// token; `logits` is left as it is, the processed copy is made in `scratch`. The
  /// log-probabilities are those of the very row drawn from (processed), under the sampler's
  /// settings.
  sampled_token sample(const float* logits, int32_t vocab, std::vector<float>& scratch);

  /// How tokens are drawn.
  const sampling::sampling_params& params() const { return sampler_.params(); }

  /// Whether rows are processed before sampling.
  bool processes_logits() const { return processor_ != nullptr; }

 private:
  sampling::sampler sampler_;
  /// Null when the sequence asks for no logit processing.
  std::unique_ptr<sampling::logit_processor> processor_;
  int32_t top_logprobs_ = -1;
};


}  // namespace conveyor::pipeline
