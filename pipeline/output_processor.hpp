// Output processing of an executor's steps: log-probabilities with their texts, incremental
// detokenizing, end tokens, stop strings and limits, and the step's output that sinks hear.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/causal_lm.hpp"
#include "pipeline/request.hpp"
#include "pipeline/sequence.hpp"
#include "pipeline/timing.hpp"
#include "pipeline/token_sampler.hpp"
#include "tokenizers/tokenizer.hpp"

namespace conveyor::pipeline {

/// What one step produced: text for sinks, requests that ended, and timings for metrics.
struct step_output {
  std::vector<token_chunk> chunks;
  std::vector<request_result> results;
  std::vector<request_timing> request_timings;
  std::vector<step_timing> step_timings;
  /// The model's error when the step's forward pass threw (every sequence then ended failed);
  /// empty otherwise.
  std::string failure;
  bool empty() const { return chunks.empty() && results.empty(); }
};

/// Turns what the model and the sampler give a sequence into its output: the text of each token
/// (whole UTF-8 characters, stop strings held back), log-probabilities with the text of every
/// token they name, and the end of the sequence (an end id, a stop string, max_tokens, the
/// context). Every sequence ends through `finish`, once. One per executor; only the executor's
/// thread touches it.
class output_processor {
 public:
  /// Processes the output of a model with `context` tokens per slot whose tokens `tokenizer`
  /// spells; `model_end_ids` end every sequence that does not ignore them (ignore_eos): the
  /// model's end ids, or its tokenizer's BOS and EOS; none for a model without real end tokens.
  output_processor(std::shared_ptr<const tokenizers::tokenizer> tokenizer, int32_t context,
                   std::vector<int32_t> model_end_ids);

  /// The clock that stamps when sequences finish.
  void set_clock(std::function<stamp()> clock) { clock_ = std::move(clock); }

  /// The ids that end a sequence of `params`: its stop_token_ids (even with ignore_eos), then
  /// the model's end ids unless ignored.
  std::vector<int32_t> end_ids_of(const sampling::sampling_params& params) const;

  /// The output state of a new sequence for `req`: its end ids, its text continuing after the
  /// prompt's last token, its stop strings (armed from the min_tokens-th token on).
  output_state start(const sequence_request& req) const;

  /// Whether `token` ends `s`.
  static bool is_end_token(const sequence& s, int32_t token);

  /// Scores tokens [start, start + count) of the prompt of `s` (teacher-forced, under the raw
  /// model) from the rows of logits of those tokens, one per token from `first_row`: the entries
  /// of tokens start + 1 .. start + count, and the first token's (which has none) when `start`
  /// is 0. Kept in `s` until the prompt is complete.
  void score_prompt_chunk(sequence& s, const model::logits_view& logits, int32_t first_row,
                          int32_t start, int32_t count);

  /// The prompt of `s` is all in the cache: its log-probabilities go out when it asked for them,
  /// and a sequence that asked for no tokens (max_tokens 0 with echo) finishes.
  void complete_prompt(sequence& s, stamp now, step_output& out);

  /// `picked` was sampled for `s` at `now`: its text and log-probabilities go out, or it ends
  /// `s` (an end id, a stop string, a complete output format, max_tokens, the end of the
  /// context).
  void emit(sequence& s, sampled_token picked, stamp now, step_output& out);

  /// Ends `s` with `how` (nothing when it has ended already), reporting its result and timing.
  /// A finished sequence's text still held back ends its answer, unless a stop string matched.
  void finish(sequence& s, outcome how, finish_reason reason, ec code, std::string message,
              step_output& out);

 private:
  /// The chunk of `s` in `out` (a new one when the last is another request's).
  static token_chunk& chunk_of(const sequence& s, step_output& out);

  std::shared_ptr<const tokenizers::tokenizer> tokenizer_;
  int32_t context_ = 0;
  std::vector<int32_t> model_end_ids_;
  std::function<stamp()> clock_ = now_stamp;
};

}  // namespace conveyor::pipeline
