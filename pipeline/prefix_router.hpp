// Which executor a request goes to when several could take it: the one that holds its prompt's
// beginning in its prefix cache, found by a hash ring over the executors keyed on the prompt's
// first tokens, unless that one is much busier than the one asking for work.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace conveyor::pipeline {

/// A consistent-hash ring of executors, keyed on the first `route_tokens` tokens of a prompt.
/// Requests whose prompts begin alike (a conversation's turns, one system prompt) map to the
/// same executor, whose prefix cache then holds their common blocks; adding or removing an
/// executor moves only the keys of its neighbours on the ring (remote workers come and go).
/// The batcher asks it in its pull loop: an executor with room takes a queued request that
/// prefers it, or one without a preference (a prompt shorter than `route_tokens`), or one whose
/// preferred executor is gone or runs `busier_by` sequences more than it does.
class prefix_router {
 public:
  /// Tokens hashed (4 blocks of 16), ring points per executor, and the load difference that
  /// overrides a preference.
  static constexpr int32_t default_route_tokens = 64;
  static constexpr int32_t points_per_executor = 64;
  static constexpr int32_t default_busier_by = 4;

  explicit prefix_router(int32_t route_tokens = default_route_tokens,
                         int32_t busier_by = default_busier_by);

  /// Puts an executor (any id unique among them) on the ring.
  void add(uint64_t executor);

  /// Takes an executor off the ring.
  void remove(uint64_t executor);

  /// The executor that `prompt`'s beginning maps to; none for a prompt shorter than the route
  /// tokens, or while the ring is empty.
  std::optional<uint64_t> preferred(const std::vector<int32_t>& prompt) const;

  /// Whether `executor`, running `load` sequences (with those sent and not yet received), takes
  /// a request that prefers `preferred`, which runs `preferred_load` (absent: gone).
  bool takes(uint64_t executor, int32_t load, std::optional<uint64_t> preferred,
             std::optional<int32_t> preferred_load) const;

 private:
  int32_t route_tokens_;
  int32_t busier_by_;
  /// Ring position -> executor.
  std::map<uint64_t, uint64_t> ring_;
};

}  // namespace conveyor::pipeline
