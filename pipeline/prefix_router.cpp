#include "pipeline/prefix_router.hpp"

#include "common/hash.hpp"

namespace conveyor::pipeline {

namespace {

uint64_t point_of(uint64_t executor, int32_t replica) {
  return hash_mix(hash_mix(0x5eedULL, executor), uint64_t(replica));
}

}  // namespace

prefix_router::prefix_router(int32_t route_tokens, int32_t busier_by)
    : route_tokens_(route_tokens), busier_by_(busier_by) {}

void prefix_router::add(uint64_t executor) {
  for (int32_t r = 0; r < points_per_executor; ++r) ring_[point_of(executor, r)] = executor;
}

void prefix_router::remove(uint64_t executor) {
  for (int32_t r = 0; r < points_per_executor; ++r) {
    auto it = ring_.find(point_of(executor, r));
    if (it != ring_.end() && it->second == executor) ring_.erase(it);
  }
}

std::optional<uint64_t> prefix_router::preferred(const std::vector<int32_t>& prompt) const {
  if (ring_.empty() || int64_t(prompt.size()) < route_tokens_) return std::nullopt;
  uint64_t key = 0;
  for (int32_t i = 0; i < route_tokens_; ++i) key = hash_mix(key, uint32_t(prompt[size_t(i)]));
  auto it = ring_.lower_bound(key);
  if (it == ring_.end()) it = ring_.begin();
  return it->second;
}

bool prefix_router::takes(uint64_t executor, int32_t load, std::optional<uint64_t> preferred,
                          std::optional<int32_t> preferred_load) const {
  if (!preferred || *preferred == executor || !preferred_load) return true;
  return *preferred_load >= load + busier_by_;
}

}  // namespace conveyor::pipeline
