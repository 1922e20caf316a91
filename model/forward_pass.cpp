// The layout of forward passes shared by the networks.
#include "model/forward_pass.hpp"

#include <string>

namespace conveyor::model {

int64_t logits_rows(const std::vector<prefill_item>& items) {
  int64_t rows = 0;
  for (const auto& it : items) rows += it.all_logits ? it.count : 1;
  return rows;
}

int64_t lay_out_rows(const std::vector<prefill_item>& items, const forward_pass& pass,
                     int64_t kv_heads, int64_t block_size, const pass_rows& out) {
  int64_t row = 0;
  int64_t outputs = 0;
  for (size_t i = pass.first; i < pass.last; ++i) {
    const auto& it = items[i];
    for (int32_t t = 0; t < it.count; ++t, ++row) {
      const int64_t position = it.start + t;
      out.tokens[row] = it.tokens[t];
      out.positions[row] = position;
      if (out.tables) out.tables[row] = it.blocks;
      const int64_t block = it.blocks[position / block_size], offset = position % block_size;
      for (int64_t kh = 0; kh < kv_heads; ++kh)
        out.cache_rows[row * kv_heads + kh] = (block * kv_heads + kh) * block_size + offset;
    }
    if (it.all_logits) {
      for (int32_t t = 0; t < it.count; ++t) out.logits_rows[outputs++] = row - it.count + t;
      continue;
    }
    const int32_t at = it.logits_at < 0 ? it.count - 1 : it.logits_at;
    out.logits_rows[outputs++] = row - it.count + at;
  }
  return outputs;
}

expected<int32_t> checked_context(const llama_shape& shape, const runtime_options& options) {
  if (options.slots < 1)
    return make_error(ec::bad_config,
                      "slots must be at least 1, got " + std::to_string(options.slots));
  const int32_t context = options.context == 0 ? shape.seq_len : options.context;
  if (context < 1 || context > shape.seq_len)
    return make_error(ec::bad_config, "context must be between 1 and the model's seq_len " +
                                          std::to_string(shape.seq_len) + ", got " +
                                          std::to_string(options.context));
  if (options.max_batched_tokens < 1)
    return make_error(ec::bad_config, "max_batched_tokens must be at least 1");
  const int32_t bs = options.block_size;
  if (bs < 8 || bs > 1024 || (bs & (bs - 1)) != 0)
    return make_error(ec::bad_config,
                      "the KV cache's block size must be a power of two from 8 "
                      "to 1024, got " +
                          std::to_string(bs));
  const int32_t one_sequence = (context + bs - 1) / bs;
  if (options.kv_blocks != 0 && options.kv_blocks < one_sequence)
    return make_error(ec::bad_config, "a KV cache of " + std::to_string(options.kv_blocks) +
                                          " blocks of " + std::to_string(bs) +
                                          " positions cannot hold one sequence of the " +
                                          "context's " + std::to_string(context) + " tokens (" +
                                          std::to_string(one_sequence) + " blocks)");
  return context;
}

}  // namespace conveyor::model
