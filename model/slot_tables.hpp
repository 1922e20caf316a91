// Block tables for callers that drive a model without a block pool (tests, benchmarks): each of
// the model's slots gets its own run of blocks, the layout of a cache of slots x context.
// Torch-free.
#pragma once

#include <cstdint>
#include <vector>

#include "model/causal_lm.hpp"

namespace conveyor::model {

/// Slot s's block table is blocks s * n .. s * n + n - 1, n the blocks of one sequence of the
/// whole context. Needs a model of at least slots x n blocks (the default `kv_blocks`).
class slot_tables {
 public:
  explicit slot_tables(const causal_lm& m)
      : per_slot_((m.context() + m.block_size() - 1) / m.block_size()) {
    for (int32_t b = 0; b < m.kv_blocks(); ++b) blocks_.push_back(b);
  }

  /// The block table of `slot`.
  const int32_t* operator[](int32_t slot) const {
    return blocks_.data() + int64_t{slot} * per_slot_;
  }

 private:
  int32_t per_slot_;
  std::vector<int32_t> blocks_;
};

}  // namespace conveyor::model
