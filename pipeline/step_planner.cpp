#include "pipeline/step_planner.hpp"

#include <algorithm>
#include <limits>

namespace conveyor::pipeline {

step_planner::step_planner(step_plan_options options) : options_(options) {}

int64_t step_planner::attended_by(int64_t start, int64_t count) {
  // Token start + i reads positions 0..start + i: start + i + 1 of them.
  return count * start + count * (count + 1) / 2;
}

step_plan step_planner::plan(int64_t decode_rows, int64_t decode_attended,
                             const std::vector<waiting_prompt>& prompts,
                             const step_cost_model& costs) const {
  step_plan out;
  step_shape shape{decode_rows, 0, decode_attended};
  out.decode_ms = costs.predict(shape);
  if (decode_rows == 0) {
    // Nobody waits on this step: prompts up to the token cap.
    out.target_ms = std::numeric_limits<double>::infinity();
  } else if (options_.target_ms > 0) {
    out.target_ms = std::max(options_.target_ms, out.decode_ms);
  } else {
    const double share = std::max(0.0, options_.target_ratio - 1.0);
    const double sequences = double(decode_rows + int64_t(prompts.size()));
    out.target_ms = out.decode_ms * (1.0 + share * sequences / double(decode_rows));
  }
  const int64_t cap = std::max<int64_t>(0, options_.max_prompt_tokens);
  const int64_t floor = std::min(cap, std::max<int64_t>(0, options_.min_prompt_tokens));
  for (size_t i = 0; i < prompts.size() && out.prompt_tokens < cap; ++i) {
    const auto& p = prompts[i];
    const int64_t start = std::clamp<int64_t>(p.done, 0, p.length);
    const int64_t left = std::min(p.length - start, cap - out.prompt_tokens);
    if (left <= 0) continue;
    // The most tokens of this prompt that keep the predicted step within the target (cost grows
    // with every token: binary search), but at least what the floor still asks for.
    auto fits = [&](int64_t k) {
      step_shape with = shape;
      with.prefill_tokens += k;
      with.attended += attended_by(start, k);
      return costs.predict(with) <= out.target_ms;
    };
    int64_t lo = 0, hi = left;
    if (fits(hi)) {
      lo = hi;
    } else {
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (fits(mid))
          lo = mid;
        else
          hi = mid - 1;
      }
    }
    const int64_t count = std::max(lo, std::min(left, floor - out.prompt_tokens));
    if (count <= 0) break;  // the budget is spent: later prompts wait (first come, first served)
    out.chunks.push_back({i, start, count, start + count == p.length});
    out.prompt_tokens += count;
    shape.prefill_tokens += count;
    shape.attended += attended_by(start, count);
    if (count < left) break;  // this prompt continues next step; none after it starts before it
  }
  out.predicted_ms = costs.predict(shape);
  return out;
}

}  // namespace conveyor::pipeline
