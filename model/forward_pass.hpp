// How the prompts of a prefill are laid out as the rows of forward passes: shared by every
// network. Torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/causal_lm.hpp"

namespace conveyor::model {

/// Items [first, last) of a prefill that run in one forward pass of `tokens` rows.
struct forward_pass {
  size_t first = 0;
  size_t last = 0;
  int64_t tokens = 0;
};

/// Calls `run(pass)` for consecutive groups of `items` of at most `capacity` tokens each; an
/// item is never split (callers make `capacity` at least the context, so that each item fits).
template <class Run>
void for_each_pass(const std::vector<prefill_item>& items, int64_t capacity, Run&& run) {
  size_t first = 0;
  while (first < items.size()) {
    forward_pass pass{first, first, 0};
    while (pass.last < items.size() && pass.tokens + items[pass.last].count <= capacity)
      pass.tokens += items[pass.last++].count;
    run(pass);
    first = pass.last;
  }
}

/// Where `lay_out_rows` writes the inputs of one pass (host memory, at least `pass.tokens` rows;
/// `cache_rows` at least `pass.tokens * kv_heads`, `logits_rows` one per item).
struct pass_rows {
  int64_t* tokens = nullptr;
  int64_t* positions = nullptr;
  /// The KV-cache row of each row and kv head, in a cache of [block, kv head, offset] rows:
  /// (blocks[position / block_size] * kv_heads + kv_head) * block_size + position % block_size.
  int64_t* cache_rows = nullptr;
  /// The rows whose logits each item returns (its `logits_at`, by default its last token;
  /// every row of an item with `all_logits`).
  int64_t* logits_rows = nullptr;
  /// The block table of each row (optional).
  const int32_t** tables = nullptr;
};

/// Logits rows a prefill of `items` returns: one per item, `count` for one with `all_logits`.
int64_t logits_rows(const std::vector<prefill_item>& items);

/// Writes the rows of `pass`: every token of its items, in order. Returns how many logits rows
/// it listed in `out.logits_rows`.
int64_t lay_out_rows(const std::vector<prefill_item>& items, const forward_pass& pass,
                     int64_t kv_heads, int64_t block_size, const pass_rows& out);

/// Checks the options shared by every network and resolves the context (0: the model's own):
/// slots, context, block size (a power of two from 8 to 1024), blocks (0, or enough for one
/// sequence of the whole context) and the pass size.
expected<int32_t> checked_context(const llama_shape& shape, const runtime_options& options);

}  // namespace conveyor::model
