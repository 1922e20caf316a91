// What one step of the continuous policy computes: every running sequence's next token, and as
// many prompt tokens as the step's time budget allows, in chunks (decode first, chunked prefill).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipeline/step_cost_model.hpp"

namespace conveyor::pipeline {

/// The settings of a `step_planner` (the executor's `step_*` and `max_batched_tokens` keys).
struct step_plan_options {
  /// Each sequence, running or waiting for its prompt, is worth `target_ratio - 1` times the
  /// predicted time of the step's decode rows: a step with R rows decoding and W prompts waiting
  /// may take decode x (1 + (target_ratio - 1) x (R + W) / R), and prompt tokens fill what is
  /// left over the decode rows. Few prompts waiting beside many running sequences leave those
  /// near their decode step; a crowd of prompts beside few running ones gets a larger share, so
  /// that the running set fills. At least 1 (1: only `min_prompt_tokens`).
  double target_ratio = 1.25;
  /// When above 0: the time a step that decodes may take, in milliseconds, instead of
  /// `target_ratio` times the decode step (never less than the decode step itself).
  double target_ms = 0;
  /// The most prompt tokens in one step.
  int64_t max_prompt_tokens = 2048;
  /// The fewest prompt tokens a step takes while prompts wait, whatever the budget says (so that
  /// every prompt gets prefilled while sequences keep decoding); capped by `max_prompt_tokens`.
  int64_t min_prompt_tokens = 16;
};

/// A prompt that waits to be prefilled, in the order prompts are served.
struct waiting_prompt {
  /// Tokens of the prompt.
  int64_t length = 0;
  /// Tokens already prefilled (by earlier chunks).
  int64_t done = 0;
};

/// Part of a prompt to prefill in this step: tokens [start, start + count) of prompt `index`.
struct prompt_chunk {
  /// The index of the prompt in the list given to `plan`.
  size_t index = 0;
  int64_t start = 0;
  int64_t count = 0;
  /// True when the chunk ends the prompt: the step's logits give its first token.
  bool last = false;
};

/// What a step computes.
struct step_plan {
  /// Chunks of prompts, in the order of the prompts.
  std::vector<prompt_chunk> chunks;
  /// Prompt tokens in `chunks`.
  int64_t prompt_tokens = 0;
  /// The predicted time of the step's decode rows alone, in milliseconds.
  double decode_ms = 0;
  /// The time the step may take (infinite when nothing decodes: no sequence waits on it).
  double target_ms = 0;
  /// The predicted time of the whole step.
  double predicted_ms = 0;
};

/// Decides each step of the continuous policy from the predicted step costs. Every running
/// sequence decodes (its row is always in the step); prompts are served first come, first
/// served, a prompt longer than what is left of the budget is cut into chunks over several
/// steps, and a prompt starts only when the budget reaches it, so a sequence is never admitted
/// into the running set at the cost of stalling those already there beyond the target.
/// Plain data: the executor gives it the running set's shape and the cost model.
class step_planner {
 public:
  /// A planner with `options`.
  explicit step_planner(step_plan_options options = {});

  /// The settings.
  const step_plan_options& options() const { return options_; }

  /// Plans a step: `decode_rows` sequences decode, reading `decode_attended` cache positions
  /// together; `prompts` wait, in order.
  step_plan plan(int64_t decode_rows, int64_t decode_attended,
                 const std::vector<waiting_prompt>& prompts, const step_cost_model& costs) const;

  /// Cache positions the tokens [start, start + count) of a prompt read together.
  static int64_t attended_by(int64_t start, int64_t count);

 private:
  step_plan_options options_;
};

}  // namespace conveyor::pipeline
