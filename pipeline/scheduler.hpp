// The scheduler of one executor: admission, the KV-cache blocks of every sequence (the block
// pool, prefix caching, preemption), the waiting and running sets, and what each step's forward
// pass computes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "model/causal_lm.hpp"
#include "pipeline/kv_block_pool.hpp"
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
  /// The chunk recomputes the cache of a preempted sequence: its logits are not used.
  bool resumes = false;
  /// The chunk returns a row of logits per token (the prompt's log-probabilities).
  bool all_logits = false;
  /// The item's first row of logits, and the row its next token is sampled from.
  int32_t first_logits_row = 0;
  int32_t sample_logits_row = 0;
};

/// A waiting sequence whose prompt equals that of a sequence prefilled in this step: it shares
/// that one's full blocks, continues in a copy of its last, partly filled one, and samples from
/// its logits.
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
  /// Blocks to copy (from, to) once the forward pass has run: the followers' last blocks.
  std::vector<std::pair<int32_t, int32_t>> block_copies;
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

/// How an executor's KV cache is kept: what the model reserved, and whether prefixes are cached.
struct kv_cache_layout {
  /// Positions per block.
  int32_t block_size = 16;
  /// Blocks in the pool (at least those of one sequence of the whole context).
  int32_t blocks = 0;
  /// Full blocks are entered in the prefix cache and found again by later prompts.
  bool prefix_caching = true;
};

/// Admits up to `slots` sequences and decides each step. Iteration-level: sequences join between
/// steps and leave the moment they end. Every sequence holds a table of blocks from the
/// executor's `kv_block_pool`, taken as its positions need them; with prefix caching a prompt
/// starts from the blocks of its longest cached prefix (never its last token, whose logits it
/// needs), and every block it fills is entered in the cache. A running sequence that finds no
/// free block preempts the most recently admitted one (a waiting one first, else a running one,
/// perhaps itself): the preempted one gives its blocks up and later recomputes its prompt and the
/// tokens it had generated (from the prefix cache, where its blocks are still there), then
/// decodes on; a prompt waits while no block is free. In a static batch (the `seed` policy) each
/// member reserves the blocks of a whole context at admission, the batch is padded to its
/// longest prompt, and finished members keep their rows until every member has finished.
/// Otherwise a `step_planner` plans each step from a `step_cost_model` fitted on the executor's
/// own steps: every running sequence decodes, prompts are prefilled in chunks within the step's
/// time budget, and a prompt equal to an earlier one's is computed once (the later ones share its
/// blocks). It decides who ends at a step boundary; the output processor ends them. Only the
/// executor's thread touches it.
class scheduler {
 public:
  /// A scheduler of up to `slots` sequences of at most `context` tokens over the blocks of
  /// `kv`.
  scheduler(int32_t slots, int32_t context, kv_cache_layout kv);

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

  /// Whether a sequence of a batch of this kind gets a slot now (a static batch's member: and
  /// the blocks of a whole context).
  bool has_slot_for(bool static_batch) const;

  /// Takes `s` into a free slot (has_slot_for) at `now`; its prompt is prefilled from the next
  /// step on, as the step planner's budget allows (a static batch: all at the next step).
  void admit(std::unique_ptr<sequence> s, stamp now);

  /// The block pool: its gauges.
  const kv_block_pool& blocks() const { return pool_; }

  /// Asks that a request end as cancelled at the next step boundary. False if unknown here.
  bool cancel(request_id id);

  // -- one step ---

  /// The sequences not yet ended that end at a step boundary at `now`, the waiting ones first:
  /// as cancelled when asked to, else as expired when past their deadline.
  std::vector<scheduled_end> ends_at(stamp now) const;

  /// Releases the slots and blocks of ended sequences (a static batch's only once all of them
  /// ended).
  void release_ended();

  /// Releases the slots and blocks of every ended sequence, a static batch's too (after abort).
  void release_all_ended();

  /// Plans the next forward pass. Valid until the next call.
  const scheduled_step& schedule();

  /// The forward pass of `step` ran in `ms` milliseconds: prompts and positions move on, the
  /// blocks they filled enter the prefix cache, the prompts now complete join the running set,
  /// and the cost model learns the step.
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
  /// Blocks for every running sequence's decode position, preempting where none is free.
  void allocate_decode_blocks();
  /// Takes blocks until `s` holds those of positions [0, positions); false when the pool ran
  /// out first (what it took stays).
  bool take_blocks(sequence& s, int32_t positions);
  /// The most recently admitted sequence holding blocks: a waiting one first, else a running one
  /// not yet preempted (`s` itself at last).
  sequence* preemption_victim(const sequence& s) const;
  /// Gives up the blocks of `s`; a running one is marked to resume (moved to the waiting set by
  /// the caller).
  void preempt(sequence& s);
  /// Starts a waiting sequence without blocks from its longest cached prefix.
  void look_up_prefix(sequence& s);
  /// Enters the full blocks of `s` among its first `filled` positions in the prefix cache.
  void register_blocks(sequence& s, int32_t filled);
  /// Returns every block of `s` to the pool.
  void release_blocks(sequence& s);
  /// Ends a sequence's stay: its blocks back to the pool, its slot free.
  void release(sequence& s);

  int32_t context_ = 0;
  kv_cache_layout kv_;
  /// Blocks of one sequence of the whole context.
  int32_t table_blocks_ = 0;
  kv_block_pool pool_;
  step_cost_model costs_;
  step_planner planner_;
  int32_t free_slots_ = 0;
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
  std::vector<sequence*> preempted_;  // running sequences preempted in this schedule()
};

}  // namespace conveyor::pipeline
