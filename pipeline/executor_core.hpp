// One executor without actors: each step schedules, runs the model's forward pass, samples and
// processes the outputs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar_compiler.hpp"
#include "model/causal_lm.hpp"
#include "pipeline/mask_worker.hpp"
#include "pipeline/output_processor.hpp"
#include "pipeline/request.hpp"
#include "pipeline/scheduler.hpp"
#include "pipeline/sequence.hpp"
#include "pipeline/step_cost_model.hpp"
#include "pipeline/step_planner.hpp"
#include "tokenizers/tokenizer.hpp"

namespace conveyor::pipeline {

/// Runs sequences on one model, one step at a time: the `scheduler` decides what the step's
/// forward pass computes (admission, KV-cache blocks and the prefix cache, decode first, prompts
/// in chunks), the
/// model runs it, each sequence's `token_sampler` picks its next token from its row of logits,
/// and the `output_processor` turns tokens into text, log-probabilities and ends. Every request
/// it takes ends exactly once, in some step's output. Only the executor's thread touches it.
class executor_core {
 public:
  /// An executor of `model`'s slots and KV-cache blocks; `prefix_caching` enters every full
  /// block in the prefix cache and starts each prompt from its longest cached prefix.
  executor_core(std::string name, std::unique_ptr<model::causal_lm> model,
                std::shared_ptr<const tokenizers::tokenizer> tokenizer, bool prefix_caching = true);

  /// Name used in metrics ("cpu:0").
  const std::string& name() const { return name_; }

  /// The device the executor is placed on, as configured ("cuda:1"); empty when not set. What
  /// metrics label it with; the model may compute elsewhere (tests map devices to "cpu").
  const std::string& device() const { return device_; }

  /// Sets `device()`.
  void set_device(std::string device) { device_ = std::move(device); }

  /// The model.
  const model::causal_lm& model() const { return *model_; }

  /// The compiler of requests' output formats that arrive uncompiled (from a remote batcher);
  /// without one such requests are rejected.
  void set_grammar_compiler(std::shared_ptr<const grammar::grammar_compiler> compiler) {
    grammars_ = std::move(compiler);
  }

  /// Computes the output-format masks of each step's sequences on a thread of their own while
  /// the model computes the next step (on for executors whose model runs on a GPU, where the
  /// host is idle meanwhile; a CPU's cores are all in the model then). A sequence whose format
  /// turns out complete then ends at the next step, its row unused. Applies to sequences
  /// admitted from now on.
  void set_overlap_masks(bool on);

  /// Sequences this executor can take now (0 while a static batch runs).
  int32_t free_slots() const { return scheduler_.free_slots(); }

  /// Sequences admitted and not yet ended.
  int32_t active() const { return scheduler_.active(); }

  /// The KV-cache blocks: their gauges.
  const kv_block_pool& kv_blocks() const { return scheduler_.blocks(); }

  /// True when a step would do work.
  bool has_work() const { return scheduler_.has_work(); }

  /// Takes requests into the executor; their prompts are prefilled from the next step on, as the
  /// step planner's budget allows (a static batch: all at the next step). `static_batch` marks a
  /// batch of the `seed` policy. Requests beyond the free slots end as failed, and so does a
  /// request whose prompt has no tokens.
  void admit(std::vector<sequence_request> requests, bool static_batch, step_output& out);

  /// Asks that a request end as cancelled at the next step boundary. False if unknown here.
  bool cancel(request_id id) { return scheduler_.cancel(id); }

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
  std::vector<request_id> active_ids() const { return scheduler_.active_ids(); }

  /// The clock that deadlines and time stamps are read from; the steady clock unless a test
  /// drives time itself.
  void set_clock(std::function<stamp()> clock);

  /// Now, on the clock of `set_clock`.
  stamp now() const { return clock_(); }

  /// The most prompt tokens in one step (`max_prompt_tokens` of the planner).
  void set_max_batched_tokens(int32_t n) { scheduler_.set_max_batched_tokens(n); }

  /// How steps are planned: the step-time target and the prompt-token bounds.
  void set_step_plan_options(const step_plan_options& options) {
    scheduler_.set_step_plan_options(options);
  }

  /// The planner's settings.
  const step_plan_options& step_plan_settings() const { return scheduler_.step_plan_settings(); }

  /// The model of step costs, fitted from this executor's own steps (timed on `set_clock`'s
  /// clock).
  const step_cost_model& step_costs() const { return scheduler_.step_costs(); }

 private:
  /// A sequence for `req`, built from what each job keeps of it.
  std::unique_ptr<sequence> make_sequence(sequence_request req) const;
  /// Schedule, forward pass, sample, process outputs; throws what the model throws.
  void run_step(step_output& out);
  /// Samples the next token of `s` from its row of logits and processes it.
  void sample(sequence& s, const float* logits, int32_t vocab, stamp now, step_output& out);

  std::string name_;
  std::string device_;
  std::function<stamp()> clock_ = now_stamp;
  std::unique_ptr<model::causal_lm> model_;
  std::shared_ptr<const grammar::grammar_compiler> grammars_;
  /// With overlapped masks: the thread that computes them, and the matchers of the sequences
  /// that sampled in this step.
  std::unique_ptr<mask_worker> masks_;
  std::vector<std::shared_ptr<grammar::token_matcher>> pending_masks_;
  scheduler scheduler_;
  output_processor outputs_;
  /// The processed copy of a row of logits (logit processing), reused across sequences.
  std::vector<float> scratch_row_;
};

}  // namespace conveyor::pipeline
