// The scheduler of one executor: its running set, KV slots and the step loop, without actors.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/causal_lm.hpp"
#include "tokenizers/detokenizer.hpp"
#include "sampling/logprobs.hpp"
#include "sampling/logit_processor.hpp"
#include "sampling/sampler.hpp"
#include "sampling/stop_strings.hpp"
#include "tokenizers/tokenizer.hpp"
#include "pipeline/request.hpp"
#include "pipeline/step_cost_model.hpp"
#include "pipeline/step_planner.hpp"
#include "pipeline/timing.hpp"

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

/// Runs sequences on one model. Iteration-level: sequences join between steps and leave the
/// moment they end. In a static batch (the `seed` policy) the whole batch is padded to its
/// longest prompt, and finished members keep their rows until every member has finished.
/// Otherwise each step is planned by a `step_planner` from a `step_cost_model` fitted on this
/// executor's own steps: every running sequence decodes, prompts are prefilled in chunks within
/// the step's time budget. Only the executor's thread touches it.
class executor_core {
 public:
  executor_core(std::string name, std::unique_ptr<model::causal_lm> model,
                std::shared_ptr<const tokenizers::tokenizer> tokenizer);

  /// Name used in metrics ("cpu:0").
  const std::string& name() const { return name_; }

  /// The device the executor is placed on, as configured ("cuda:1"); empty when not set. What
  /// metrics label it with; the model may compute elsewhere (tests map devices to "cpu").
  const std::string& device() const { return device_; }

  /// Sets `device()`.
  void set_device(std::string device) { device_ = std::move(device); }

  /// The model.
  const model::causal_lm& model() const { return *model_; }

  /// Sequences this executor can take now (0 while a static batch runs).
  int32_t free_slots() const;

  /// Sequences admitted and not yet ended.
  int32_t active() const { return static_cast<int32_t>(running_.size() + waiting_.size()); }

  /// True when a step would do work.
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }

  /// Takes requests into the executor; their prompts are prefilled from the next step on, as the
  /// step planner's budget allows (a static batch: all at the next step). `static_batch` marks a
  /// batch of the `seed` policy. Requests beyond the free slots end as failed, and so does a
  /// request whose prompt has no tokens.
  void admit(std::vector<sequence_request> requests, bool static_batch, step_output& out);

  /// Asks that a request end as cancelled at the next step boundary. False if unknown here.
  bool cancel(request_id id);

  /// One step: ends cancelled and expired sequences, then runs one forward pass over one token
  /// of every running sequence and the prompt tokens the step planner gives the step (chunks of
  /// the waiting prompts, first come first served; a static batch: every prompt whole, padded).
  /// Never throws: when the model throws (out of memory, any torch error), every sequence not
  /// yet ended ends failed with `ec::model_failure`, in the same output as those the step ended
  /// before, and `failure` says what the model said.
  step_output step();

  /// Ends every sequence with `how` (shutdown, drain), reporting each.
  void abort_all(outcome how, ec code, const std::string& message, step_output& out);

  /// Ids of the sequences admitted and not yet ended.
  std::vector<request_id> active_ids() const;

  /// The clock that deadlines and time stamps are read from; the steady clock unless a test
  /// drives time itself.
  void set_clock(std::function<stamp()> clock) { clock_ = std::move(clock); }

  /// Now, on the clock of `set_clock`.
  stamp now() const { return clock_(); }

  /// The most prompt tokens in one step (`max_prompt_tokens` of the planner).
  void set_max_batched_tokens(int32_t n);

  /// How steps are planned: the step-time target and the prompt-token bounds.
  void set_step_plan_options(const step_plan_options& options);

  /// The planner's settings.
  const step_plan_options& step_plan_settings() const { return planner_.options(); }

  /// The model of step costs, fitted from this executor's own steps (timed on `set_clock`'s
  /// clock).
  const step_cost_model& step_costs() const { return costs_; }

 private:
  struct sequence {
    sequence_request req;
    int32_t slot = 0;
    int32_t position = 0;    // position of next_token
    int32_t next_token = 0;  // sampled, not yet fed to the model
    int32_t generated = 0;
    bool ended = false;  // a static batch keeps ended members until the batch ends
    bool cancel_requested = false;
    sampling::sampler sampler;
    tokenizers::incremental_detokenizer detokenizer;
    sampling::stop_string_matcher stops;
    std::vector<time_point> token_times;
    // Log-probabilities: those of the token sample_next just picked, for emit.
    std::optional<sampling::token_scores> scores;
    // -- logit processing: null when the request asks for none (its rows are not copied) --
    std::unique_ptr<sampling::logit_processor> processor;
    // The ids that end it (end_ids_of), fixed at admission.
    std::vector<int32_t> end_ids;
    // -- chunked prefill --
    int32_t prefilled = 0;  // prompt tokens in the cache
    // The prompt's log-probabilities, scored chunk by chunk, and the detokenizer of their texts.
    std::vector<token_logprob> prompt_entries;
    std::optional<tokenizers::incremental_detokenizer> prompt_detokenizer;
    bool prefill_done() const { return prefilled >= int32_t(req.prompt.size()); }
  };
  /// One item of a step's forward pass.
  struct step_row {
    sequence* seq = nullptr;
    bool prefill = false;   // a chunk of a prompt (else one decode token)
    bool completes = false;  // the chunk ends the prompt
  };

  void run_step(step_output& out);
  /// The prefill items of a static batch: every waiting prompt whole, right-padded.
  void plan_static_prefill();
  /// The prefill items of a continuous step, from the planner, and the followers that join it.
  void plan_chunked_prefill(int64_t decode_rows, int64_t decode_attended);
  /// Picks the next token of `s` from its row of logits: the one place a row becomes a token,
  /// where logit processing (penalties, bias) and log-probabilities hook in.
  int32_t sample_next(sequence& s, const float* logits, int32_t vocab);
  /// Ends a just-prefilled `s` that asked for no tokens (max_tokens 0 with echo).
  void end_if_prompt_only(sequence& s, stamp now, step_output& out);
  void emit(sequence& s, int32_t token, stamp now, step_output& out);
  /// The chunk of `s` in this step's output (a new one when the last is another request's).
  token_chunk& chunk_of(const sequence& s, step_output& out);
  /// Log-probabilities: the prompt's, teacher-forced, from the rows of logits of its
  /// tokens [start, start + count) (one row per token from `first_row`): the entries of tokens
  /// start + 1 .. start + count (the first token's, which has none, when start is 0). Kept in
  /// the sequence until the prompt is complete.
  void score_prompt_chunk(sequence& s, const model::logits_view& logits, int32_t first_row,
                          int32_t start, int32_t count);
  void finish(sequence& s, outcome how, finish_reason reason, ec code, std::string message,
              step_output& out);
  void release_ended();
  bool is_end_token(const sequence& s, int32_t token) const;
  /// The ids that end a sequence of `p`: its stop_token_ids, and the model's end ids (or the
  /// tokenizer's BOS and EOS) unless ignored.
  std::vector<int32_t> end_ids_of(const sampling::sampling_params& p) const;

  std::string name_;
  std::string device_;
  std::function<stamp()> clock_ = now_stamp;
  std::unique_ptr<model::causal_lm> model_;
  std::shared_ptr<const tokenizers::tokenizer> tokenizer_;
  step_cost_model costs_;
  step_planner planner_;
  std::vector<int32_t> free_slots_;
  std::deque<std::unique_ptr<sequence>> waiting_;   // admitted, prompt not yet all prefilled
  std::vector<std::unique_ptr<sequence>> running_;  // prefilled
  bool static_batch_ = false;
  // Reused across steps.
  std::vector<model::prefill_item> items_;
  std::vector<std::vector<int32_t>> padded_prompts_;
  std::vector<step_row> rows_;
  std::vector<waiting_prompt> prompts_;    // the planner's view of waiting_
  std::vector<sequence*> candidates_;      // the sequence of each entry of prompts_
  // A waiting sequence whose prompt equals that of an earlier one: it waits for that one's
  // prefill to complete and then copies it.
  struct pending_follower {
    sequence* seq;
    sequence* leader;
  };
  std::vector<pending_follower> pending_followers_;
  // A new sequence whose prompt equals that of rows_[leader_row]: it shares that row's prefill.
  struct follower {
    sequence* seq;
    size_t leader_row;
  };
  std::vector<follower> followers_;
  // The row of logits each entry of rows_ samples from (an all_logits item has several).
  std::vector<int32_t> sample_rows_;
  /// The processed copy of a row of logits (logit processing).
  std::vector<float> scratch_row_;
};

}  // namespace conveyor::pipeline
