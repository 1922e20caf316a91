// What one executor step costs, learnt from the executor's own step timings: a linear model in
// the step's decode rows, prompt tokens and attended positions, fitted online.
#pragma once

#include <array>
#include <cstdint>

namespace conveyor::pipeline {

/// What a step computes, as the cost model sees it.
struct step_shape {
  /// Sequences that decode one token in the step.
  int64_t decode_rows = 0;
  /// Prompt tokens prefilled in the step (chunks of prompts included).
  int64_t prefill_tokens = 0;
  /// Cache positions read by attention, summed over every row of the step: a row at position p
  /// reads p + 1 positions.
  int64_t attended = 0;
};

/// The settings of a `step_cost_model`.
struct step_cost_options {
  /// The weight of a past step shrinks by this factor with each new step that measures what it
  /// measured (1: never forgets); 0.98 keeps about the last 50 such steps in view, so the model
  /// follows a machine whose speed changes (other load, other batch shapes). Steps that prefill
  /// prompt tokens are the only ones that measure what a prompt token costs: they shrink only
  /// with newer such steps, so a long run of decode-only steps (one long generation alone)
  /// does not forget what prompts cost. Every step shrinks the decode-only steps before it.
  double forgetting = 0.98;
  /// Ridge term pulling each coefficient toward zero, in the units of the normal equations
  /// (milliseconds and the scaled features below). It keeps the fit defined when a term has not
  /// varied yet (only pure decode steps seen: the prompt-token cost is unknown and stays near 0,
  /// so the planner tries prefills and learns their cost from the next step).
  double ridge = 1e-3;
};

/// Step time (milliseconds) ~ c0 + c_row * decode_rows + c_token * prefill_tokens +
/// c_attend * attended / 1000, fitted by exponentially weighted least squares (the normal
/// equations kept as decayed sums, solved on change): the sums of decode-only steps and those
/// of steps with prompt tokens are kept apart and forgotten at their own pace
/// (`step_cost_options::forgetting`), and solved together. Plain data, no clock: the executor
/// feeds it the shapes and durations it measured.
class step_cost_model {
 public:
  /// The number of terms.
  static constexpr int terms = 4;

  /// Coefficients of the fitted model, in milliseconds per unit of each term.
  struct coefficients {
    /// Fixed cost of a step.
    double fixed_ms = 0;
    /// Per decode row.
    double per_row_ms = 0;
    /// Per prompt token.
    double per_token_ms = 0;
    /// Per thousand attended positions.
    double per_kilo_attended_ms = 0;
  };

  /// An empty model: it predicts 0 until it has seen a step.
  explicit step_cost_model(step_cost_options options = {});

  /// Adds one measured step of `shape` that took `ms` milliseconds.
  void observe(const step_shape& shape, double ms);

  /// The predicted milliseconds of a step of `shape` (never negative).
  double predict(const step_shape& shape) const;

  /// The fitted coefficients, each at least 0 (a negative fit, from noise or collinear
  /// terms, is read as 0).
  const coefficients& fitted() const;

  /// Steps observed.
  int64_t samples() const { return samples_; }

 private:
  static std::array<double, terms> features(const step_shape& shape);
  void solve() const;

  /// Decayed sums of x x^T and x * ms over some of the steps.
  struct sums {
    std::array<std::array<double, terms>, terms> xx{};
    std::array<double, terms> xy{};
    void decay(double keep);
    void add(const std::array<double, terms>& x, double ms);
  };

  step_cost_options options_;
  // Steps without prompt tokens, and steps with them.
  sums decode_only_;
  sums with_prompts_;
  int64_t samples_ = 0;
  // The solution of the current sums, computed when first asked for after a change.
  mutable coefficients fitted_;
  mutable bool stale_ = false;
};

}  // namespace conveyor::pipeline
