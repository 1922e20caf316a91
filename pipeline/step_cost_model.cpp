#include "pipeline/step_cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace conveyor::pipeline {

step_cost_model::step_cost_model(step_cost_options options) : options_(options) {}

std::array<double, step_cost_model::terms> step_cost_model::features(const step_shape& shape) {
  return {1.0, double(shape.decode_rows), double(shape.prefill_tokens),
          double(shape.attended) / 1000.0};
}

void step_cost_model::sums::decay(double keep) {
  for (int i = 0; i < terms; ++i) {
    for (int j = 0; j < terms; ++j) xx[i][j] *= keep;
    xy[i] *= keep;
  }
}

void step_cost_model::sums::add(const std::array<double, terms>& x, double ms) {
  for (int i = 0; i < terms; ++i) {
    for (int j = 0; j < terms; ++j) xx[i][j] += x[i] * x[j];
    xy[i] += x[i] * ms;
  }
}

void step_cost_model::observe(const step_shape& shape, double ms) {
  if (!std::isfinite(ms) || ms < 0) return;
  const auto x = features(shape);
  // Each step measures the fixed, per-row and attention costs: the decode-only steps before it
  // weigh less. Only a step with prompt tokens measures their cost: the steps with prompt tokens
  // before it weigh less only then. Both sets are weighted sums of steps, so their total stays a
  // proper least-squares problem.
  decode_only_.decay(options_.forgetting);
  if (shape.prefill_tokens > 0) {
    with_prompts_.decay(options_.forgetting);
    with_prompts_.add(x, ms);
  } else {
    decode_only_.add(x, ms);
  }
  ++samples_;
  stale_ = true;
}

void step_cost_model::solve() const {
  // Non-negative least squares by elimination of terms: solve (X^T W X + ridge I) c = X^T W y
  // over the terms still in use; while a coefficient comes out negative, the most negative term
  // is fixed at 0 and the rest solved again (a step never gets faster with more work, so a
  // negative cost is noise or a term that cannot be told apart from another).
  std::array<bool, terms> used;
  used.fill(true);
  double c[terms] = {0, 0, 0, 0};
  for (int round = 0; round < terms; ++round) {
    int index[terms];
    int n = 0;
    for (int i = 0; i < terms; ++i)
      if (used[i]) index[n++] = i;
    double a[terms][terms + 1];
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j)
        a[i][j] = decode_only_.xx[index[i]][index[j]] + with_prompts_.xx[index[i]][index[j]] +
                  (i == j ? options_.ridge : 0.0);
      a[i][n] = decode_only_.xy[index[i]] + with_prompts_.xy[index[i]];
    }
    // Gaussian elimination with partial pivoting.
    for (int col = 0; col < n; ++col) {
      int pivot = col;
      for (int r = col + 1; r < n; ++r)
        if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
      if (pivot != col)
        for (int j = 0; j <= n; ++j) std::swap(a[col][j], a[pivot][j]);
      if (a[col][col] == 0.0) continue;  // only without a ridge: the term stays 0
      for (int r = 0; r < n; ++r) {
        if (r == col) continue;
        const double f = a[r][col] / a[col][col];
        for (int j = col; j <= n; ++j) a[r][j] -= f * a[col][j];
      }
    }
    int most_negative = -1;
    for (int i = 0; i < terms; ++i) c[i] = 0.0;
    for (int i = 0; i < n; ++i) {
      double v = a[i][i] == 0.0 ? 0.0 : a[i][n] / a[i][i];
      if (!std::isfinite(v)) v = 0.0;
      c[index[i]] = v;
      if (v < 0 && (most_negative < 0 || v < c[most_negative])) most_negative = index[i];
    }
    if (most_negative < 0) break;
    used[size_t(most_negative)] = false;
    c[most_negative] = 0.0;
  }
  for (double& v : c) v = std::max(0.0, v);
  fitted_ = coefficients{c[0], c[1], c[2], c[3]};
  stale_ = false;
}

const step_cost_model::coefficients& step_cost_model::fitted() const {
  if (stale_) solve();
  return fitted_;
}

double step_cost_model::predict(const step_shape& shape) const {
  const auto& c = fitted();
  const auto x = features(shape);
  return std::max(0.0, c.fixed_ms * x[0] + c.per_row_ms * x[1] + c.per_token_ms * x[2] +
                           c.per_kilo_attended_ms * x[3]);
}

}  // namespace conveyor::pipeline
