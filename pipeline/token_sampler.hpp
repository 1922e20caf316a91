// The sampling of one sequence: logit processing, the seeded sampler and the log-probabilities
// of the distribution it draws from.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "grammar/token_matcher.hpp"
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
  /// The sequence's output format is complete with this token and allows nothing more: the
  /// sequence ends here ("stop").
  bool format_complete = false;
  /// The format refused the token its own mask allowed (a defect of the engine): the sequence
  /// cannot go on and ends failed.
  bool format_broken = false;
};

/// Picks the tokens of one sequence, one row of logits at a time, on a copy of the row: the
/// mask of its output format (structured outputs) first, then logit processing (penalties,
/// bias, min_tokens), then the sampler with the sequence's own generator, so that what it picks
/// never depends on the batch. The log-probabilities are those of the masked, processed row.
/// One instance per sequence; only the executor's thread touches it (the format's next mask may
/// be computed on another thread between two `sample` calls: `matcher()`).
class token_sampler {
 public:
  /// A sampler drawing as `params` says, after the logit processing `params` asks for (none
  /// when it changes nothing: rows are then not copied), for a sequence whose prompt is
  /// `prompt` (the repetition penalty counts its tokens) and which ends on `end_ids` (min_tokens
  /// keeps them from being sampled). With `params.logprobs` 0 or more, each pick comes with its
  /// log-probability and that many alternatives (at most max_top_logprobs).
  token_sampler(const sampling::sampling_params& params, const std::vector<int32_t>& prompt,
                const std::vector<int32_t>& end_ids);

  /// The same, for a sequence whose output follows `format` (null: free), ending on `end_ids`
  /// where the format may end. The first mask is computed here; throws std::runtime_error when
  /// the engine fails on it.
  token_sampler(const sampling::sampling_params& params, const std::vector<int32_t>& prompt,
                const std::vector<int32_t>& end_ids,
                std::shared_ptr<const grammar::compiled_grammar> format);

  /// Picks the next token from `logits`, the row of `vocab` logits after the sequence's last
  /// token; `logits` is left as it is, the processed copy is made in `scratch`. The
  /// log-probabilities are those of the very row drawn from (processed), under the sampler's
  /// settings.
  sampled_token sample(const float* logits, int32_t vocab, std::vector<float>& scratch);

  /// How tokens are drawn.
  const sampling::sampling_params& params() const { return sampler_.params(); }

  /// Whether rows are processed before sampling.
  bool processes_logits() const { return processor_ != nullptr || matcher_ != nullptr; }

  /// The matcher of the output format; null for a free sequence. After each `sample` that did
  /// not end the sequence, its `update_mask` must run before the next `sample`: `sample` runs it
  /// itself unless `defer_masks` was called.
  const std::shared_ptr<grammar::token_matcher>& matcher() const { return matcher_; }

  /// Leaves `update_mask` after each token to the caller (the executor computes the masks of a
  /// step's sequences while the model computes the next step).
  void defer_masks() { defer_masks_ = true; }

 private:
  sampling::sampler sampler_;
  /// Null when the sequence asks for no logit processing.
  std::unique_ptr<sampling::logit_processor> processor_;
  int32_t top_logprobs_ = -1;
  /// Null when the sequence's output is free. A shared_ptr keeps it alive for a mask
  /// computation in flight when the sequence ends.
  std::shared_ptr<grammar::token_matcher> matcher_;
  std::vector<int32_t> end_ids_;
  bool defer_masks_ = false;
};


}  // namespace conveyor::pipeline
