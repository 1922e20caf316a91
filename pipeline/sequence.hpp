// One request inside an executor: the request and what the scheduler, the token sampler and the
// output processor each keep about it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "pipeline/request.hpp"
#include "pipeline/timing.hpp"
#include "pipeline/token_sampler.hpp"
#include "sampling/stop_strings.hpp"
#include "tokenizers/detokenizer.hpp"

namespace conveyor::pipeline {

/// What the scheduler keeps of a sequence: its KV-cache blocks and how far the model has come.
struct scheduling_state {
  /// The block table: block i holds positions [i * block_size, (i + 1) * block_size).
  std::vector<int32_t> blocks;
  /// Leading blocks that hold a prefix entered in the prefix cache (entered by this sequence,
  /// found there, or shared with the sequence whose prompt it shares).
  int32_t registered = 0;
  /// Tokens in the cache while the prompt is prefilled (chunked prefill); from the first
  /// uncached position on after a prefix-cache hit.
  int32_t prefilled = 0;
  /// Position of `next_token`.
  int32_t position = 0;
  /// Sampled, not yet fed to the model.
  int32_t next_token = 0;
  /// The generated tokens fed to the model, in order: what the cache holds after the prompt.
  std::vector<int32_t> fed;
  /// Preempted for want of blocks: its blocks were given up, and `resume_tokens` (the prompt and
  /// `fed`) are prefilled again before it decodes on from `position` with `next_token`.
  bool resuming = false;
  std::vector<int32_t> resume_tokens;
  /// Whether the prefix cache was looked up; the prompt tokens it was asked for and found then.
  bool looked_up = false;
  int32_t queried_tokens = 0;
  int32_t cached_tokens = 0;
  /// The sequence ends as cancelled at the next step boundary.
  bool cancel_requested = false;
};

/// What output processing keeps of a sequence: the text so far, its stop conditions and the
/// log-probabilities of its prompt.
struct output_state {
  /// Built from the parts without defaults; the others start empty.
  output_state(std::vector<int32_t> end_ids, tokenizers::incremental_detokenizer detokenizer,
               sampling::stop_string_matcher stops);

  /// The ids that end the sequence (output_processor::end_ids_of), fixed at admission.
  std::vector<int32_t> end_ids;
  /// Tokens generated (end tokens not counted).
  int32_t generated = 0;
  /// The text of the generated tokens, after the prompt's last token.
  tokenizers::incremental_detokenizer detokenizer;
  /// The request's stop strings, over the generated text.
  sampling::stop_string_matcher stops;
  /// When each token was generated.
  std::vector<time_point> token_times;
  /// The prompt's log-probabilities, scored chunk by chunk until the prompt is complete.
  std::vector<token_logprob> prompt_entries;
  /// The texts of the prompt's tokens, for `prompt_entries`.
  std::optional<tokenizers::incremental_detokenizer> prompt_detokenizer;
};

/// One admitted request, from admission until it ends. Only the executor's thread touches it.
struct sequence {
  sequence(sequence_request request, token_sampler sampler, output_state output);

  /// The request as admitted; its time stamps fill in as it runs.
  sequence_request req;
  /// Set once, when the sequence ends (output_processor::finish). A static batch keeps ended
  /// members in their slots until the whole batch has ended.
  bool ended = false;
  /// The scheduler's.
  scheduling_state schedule;
  /// The token sampler's: it picks every token of this sequence.
  token_sampler sampler;
  /// The output processor's.
  output_state output;

  /// The tokens a prefill computes: the prompt, or the prompt and the fed tokens of a sequence
  /// that resumes.
  const std::vector<int32_t>& prefill_tokens() const {
    return schedule.resuming ? schedule.resume_tokens : req.prompt;
  }

  /// Whether every token the prefill computes is in the cache.
  bool prefill_done() const { return schedule.prefilled >= int32_t(prefill_tokens().size()); }

  /// The token at cache position `p`: of the prompt, then of the fed tokens.
  int32_t token_at(int32_t p) const {
    const auto n = int32_t(req.prompt.size());
    return p < n ? req.prompt[size_t(p)] : schedule.fed[size_t(p - n)];
  }
};

}  // namespace conveyor::pipeline
