// The scheduler of one executor: admission into KV-cache slots, the waiting and running sets,
// and what each step's forward pass computes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "model/causal_lm.hpp"
#include "pipeline/request.hpp"
#include "pipeline/sequence.hpp"
#include "pipeline/step_cost_model.hpp"
#include "pipeline/step_planner.hpp"

namespace conveyor::pipeline {

/// One sequence's item in a step's forward pass (the item of the same index).
struct step_row {
  sequence* seq = nullptr;
  /// A chunk of its prompt (else one decode token).
  bool prefill = false;
  /// The chunk ends the prompt.
  bool completes = false;
  /// The chunk's first prompt token and its prompt tokens, padding not counted.
  int32_t prompt_start = 0;
  int32_t prompt_count = 0;
  /// The chunk returns a row of logits per token (the prompt's log-probabilities).
  bool all_logits = false;
  /// The item's first row of logits, and the row its next token is sampled from.
  int32_t first_logits_row = 0;
  int32_t sample_logits_row = 0;
};

/// A waiting sequence whose prompt equals that of a sequence prefilled in this step: it copies
/// that one's KV-cache rows and samples from its logits.
struct step_follower {
  sequence* seq = nullptr;
  /// The row of the sequence it copies.
  size_t leader_row = 0;
};

/// What one step's forward pass computes.
struct scheduled_step {
  /// The forward pass: the chunks of prompts, then one token of every running sequence.
  std::vector<model::prefill_item> items;
  /// What each item is.
  std::vector<step_row> rows;
  /// Sequences that share the prefill of a row.
  std::vector<step_follower> followers;
  /// Rows of prompt chunks (the first rows).
  size_t prefill_rows = 0;
  /// Rows that decode, and the cache positions they read together.
  int64_t decode_rows = 0;
  int64_t decode_attended = 0;
  /// Decoding rows of sequences not yet ended (a static batch's ended members keep their rows).
  int64_t decoded = 0;
  /// Real prompt tokens (padding not counted).
  int64_t prompt_tokens = 0;
  /// Tokens computed, padding included.
  int64_t computed = 0;
  /// Cache positions the whole pass reads.
  int64_t attended = 0;

  /// Whether the step computes nothing of use.
  bool idle() const { return prefill_rows == 0 && decoded == 0; }
  /// The shape the step cost model learns from.
  step_shape shape() const {
    step_shape s;
    s.decode_rows = decode_rows;
    s.prefill_tokens = computed - decode_rows;
    s.attended = attended;
    return s;
  }
};

/// A sequence the scheduler ends at a step boundary, and how.
struct scheduled_end {
  sequence* seq = nullptr;
  outcome how = outcome::cancelled;
  ec code = ec::none;
  std::string message;
};

/// Admits sequences into free KV-cache slots and decides each step. Iteration-level: sequences
/// join between steps and leave the moment they end. In a static batch (the `seed` policy) the
/// whole batch is padded to its longest prompt, and finished members keep their rows until every
/// member has finished. Otherwise a `step_planner` plans each step from a `step_cost_model`
/// fitted on the executor's own steps: every running sequence decodes, prompts are prefilled in
/// chunks within the step's time budget, and a prompt equal to an earlier one's is computed once.
/// It decides who ends at a step boundary; the output processor ends them. Only the executor's
/// thread touches it.
class scheduler {
 public:
  /// A scheduler of a model's `slots` KV-cache slots of `context` tokens; `copies_prefixes`:
  /// the model copies a prompt's cache rows from one slot to another (model::causal_lm).
  scheduler(int32_t slots, int32_t context, bool copies_prefixes);

  // -- the sequences ---

  /// Sequences that can be admitted now (0 while a static batch runs).
  int32_t free_slots() const;

  /// Sequences admitted and not yet released.
  int32_t active() const { return static_cast<int32_t>(running_.size() + waiting_.size()); }

  /// True when a step would do work.
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }

  /// Ids of the sequences admitted and not yet ended.
  std::vector<request_id> active_ids() const;

  /// Every sequence held, those waiting for their prompt first.
  std::vector<sequence*> sequences() const;

  // -- admission ---

  /// Opens the admission of a batch: `static_batch` marks one of the `seed` policy. An idle
  /// scheduler takes the kind of the batch.
  void open_admission(bool static_batch);

  /// Whether a sequence of a batch of this kind gets a slot now.
  bool has_slot_for(bool static_batch) const;

  /// Takes `s` into a free slot (has_slot_for) at `now`; its prompt is prefilled from the next
  /// step on, as the step planner's budget allows (a static batch: all at the next step).
  void admit(std::unique_ptr<sequence> s, stamp now);

  /// Asks that a request end as cancelled at the next step boundary. False if unknown here.
  bool cancel(request_id id);

  // -- one step ---

  /// The sequences not yet ended that end at a step boundary at `now`, the waiting ones first:
  /// as cancelled when asked to, else as expired when past their deadline.
  std::vector<scheduled_end> ends_at(stamp now) const;

  /// Releases the slots of ended sequences (a static batch's only once all of them ended).
  void release_ended();

  /// Releases the slots of every ended sequence, a static batch's too (after abort).
  void release_all_ended();

  /// Plans the next forward pass. Valid until the next call.
  const scheduled_step& schedule();

  /// The forward pass of `step` ran in `ms` milliseconds: prompts and positions move on, the
  /// prompts now complete join the running set, and the cost model learns the step.
  void advance(const scheduled_step& step, double ms);

  // -- settings ---

  /// The most prompt tokens in one step (`max_prompt_tokens` of the planner).
  void set_max_batched_tokens(int32_t n);

  /// How steps are planned.
  void set_step_plan_options(const step_plan_options& options) { planner_ = step_planner{options}; }

  /// The planner's settings.
  const step_plan_options& step_plan_settings() const { return planner_.options(); }

  /// The model of step costs, fitted from the steps `advance` was told of.
  const step_cost_model& step_costs() const { return costs_; }

 private:
  /// The prefill rows of a static batch: every waiting prompt whole, right-padded.
  void plan_static_prefill();
  /// The prefill rows of a continuous step, from the planner, and the followers that join it.
  void plan_chunked_prefill();

  int32_t context_ = 0;
  bool copies_prefixes_ = false;
  step_cost_model costs_;
  step_planner planner_;
  std::vector<int32_t> free_slots_;
  std::deque<std::unique_ptr<sequence>> waiting_;   // admitted, prompt not yet all prefilled
  std::vector<std::unique_ptr<sequence>> running_;  // prefilled
  bool static_batch_ = false;
  // Reused across steps.
  scheduled_step step_;
  std::vector<std::vector<int32_t>> padded_prompts_;
  std::vector<waiting_prompt> prompts_;  // the planner's view of waiting_
  std::vector<sequence*> candidates_;    // the sequence of each entry of prompts_
  // A waiting sequence whose prompt equals that of an earlier one: it waits for that one's
  // prefill to complete and then copies it.
  struct pending_follower {
    sequence* seq;
    sequence* leader;
  };
  std::vector<pending_follower> pending_followers_;
};

}  // namespace conveyor::pipeline
