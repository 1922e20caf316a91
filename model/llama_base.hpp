// What both Llama networks (llama_loops.cpp, llama_ops.cpp) share: the shape, slots, context and
// end ids they were built with, the KV cache's size, and the one-line description. Internal to
// model/ and torch-free.
#pragma once

#include <string>
#include <vector>

#include "model/causal_lm.hpp"

namespace conveyor::model {

class llama_base : public causal_lm {
 public:
  /// `implementation` names the network in `describe`, e.g. "plain loops".
  llama_base(const llama_shape& shape, bool synthetic, std::vector<int32_t> end_ids,
             const runtime_options& opt, int32_t context, std::string implementation);

  const llama_shape& shape() const override { return shape_; }
  int32_t slots() const override { return slots_; }
  int32_t context() const override { return context_; }
  int32_t block_size() const override { return block_size_; }
  int32_t kv_blocks() const override { return kv_blocks_; }
  bool ignores_end_tokens() const override { return synthetic_; }
  const std::vector<int32_t>& end_ids() const override { return end_ids_; }
  int64_t kv_cache_bytes() const override;
  std::string describe() const override;

 protected:
  llama_shape shape_;
  int32_t slots_;
  int32_t context_;
  int32_t block_size_;
  int32_t kv_blocks_;
  /// Blocks of one sequence of the whole context: the length of a full block table.
  int32_t table_blocks_;
  bool synthetic_;
  std::vector<int32_t> end_ids_;
  std::string device_name_;
  compute_dtype dtype_;
  std::string implementation_;
};

}  // namespace conveyor::model
