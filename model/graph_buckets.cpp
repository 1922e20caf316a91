// The batch-size buckets of the decode step's CUDA graphs.
#include "model/graph_buckets.hpp"

#include <algorithm>

namespace conveyor::model {

graph_bucket_table::graph_bucket_table(int32_t slots) {
  for (int64_t b : {1, 2, 4})
    if (b < slots) buckets_.push_back(b);
  for (int64_t b = 8; b < slots; b += 8) buckets_.push_back(b);
  buckets_.push_back(std::max<int64_t>(slots, 1));
}

int64_t graph_bucket_table::bucket_of(int64_t n) const {
  auto it = std::lower_bound(buckets_.begin(), buckets_.end(), n);
  return it == buckets_.end() ? buckets_.back() : *it;
}

}  // namespace conveyor::model
