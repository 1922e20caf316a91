#include "sampling/logit_processor.hpp"

#include <limits>

namespace conveyor::sampling {

bool logit_settings::active() const {
  return presence_penalty != 0 || frequency_penalty != 0 || repetition_penalty != 1 ||
         !logit_bias.empty() || (min_tokens > 0 && !min_tokens_masked.empty());
}

logit_processor::logit_processor(logit_settings settings, const std::vector<int32_t>& prompt)
    : settings_(std::move(settings)) {
  if (settings_.repetition_penalty != 1)
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
  if (settings_.presence_penalty != 0 || settings_.frequency_penalty != 0) ++counts_[token];
  if (settings_.repetition_penalty != 1) mark_seen(token);
}

int32_t logit_processor::count(int32_t token) const {
  auto it = counts_.find(token);
  return it == counts_.end() ? 0 : it->second;
}

void logit_processor::apply(float* row, int32_t vocab) const {
  const auto& s = settings_;
  for (const auto& b : s.logit_bias)
    if (b.id >= 0 && b.id < vocab) row[b.id] += b.bias;
  if (generated_ < s.min_tokens)
    for (auto id : s.min_tokens_masked)
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
