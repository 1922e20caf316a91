#include "sampling/logit_processor.hpp"

#include <limits>
#include <utility>

namespace conveyor::sampling {

bool logit_processor::needed(const sampling_params& params,
                             const std::vector<int32_t>& min_tokens_masked) {
  return params.presence_penalty != 0 || params.frequency_penalty != 0 ||
         params.repetition_penalty != 1 || !params.logit_bias.empty() ||
         (params.min_tokens > 0 && !min_tokens_masked.empty());
}

logit_processor::logit_processor(const sampling_params& params,
                                 std::vector<int32_t> min_tokens_masked,
                                 const std::vector<int32_t>& prompt)
    : params_(params), min_tokens_masked_(std::move(min_tokens_masked)) {
  if (params_.repetition_penalty != 1)
    for (auto t : prompt) mark_seen(t);
}

void logit_processor::mark_seen(int32_t token) {
  if (token < 0) return;
  if (size_t(token) >= is_seen_.size()) is_seen_.resize(size_t(token) + 1, false);
  if (is_seen_[size_t(token)]) return;
  is_seen_[size_t(token)] = true;
  seen_.push_back(token);
}

void logit_processor::accept(int32_t token) {
  ++generated_;
  if (params_.presence_penalty != 0 || params_.frequency_penalty != 0) ++counts_[token];
  if (params_.repetition_penalty != 1) mark_seen(token);
}

int32_t logit_processor::count(int32_t token) const {
  auto it = counts_.find(token);
  return it == counts_.end() ? 0 : it->second;
}

void logit_processor::apply(float* row, int32_t vocab) const {
  const auto& s = params_;
  for (const auto& b : s.logit_bias)
    if (b.id >= 0 && b.id < vocab) row[b.id] += b.bias;
  if (generated_ < s.min_tokens)
    for (auto id : min_tokens_masked_)
      if (id >= 0 && id < vocab) row[id] = -std::numeric_limits<float>::infinity();
  if (s.repetition_penalty != 1) {
    const float p = s.repetition_penalty;
    for (auto id : seen_) {
      if (id >= vocab) continue;
      float& x = row[id];
      x = x > 0 ? x / p : x * p;
    }
  }
  if (s.presence_penalty != 0 || s.frequency_penalty != 0) {
    for (const auto& [id, n] : counts_) {
      if (id < 0 || id >= vocab) continue;
      row[id] -= s.frequency_penalty * float(n) + s.presence_penalty;
    }
  }
}

}  // namespace conveyor::sampling
