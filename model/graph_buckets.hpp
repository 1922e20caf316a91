// The batch sizes whose decode step is captured as a CUDA graph. A graph replays fixed shapes,
// so a step of n sequences runs as the smallest bucket >= n with padding rows. Torch-free, so
// that it is tested without a device.
#pragma once

#include <cstdint>
#include <vector>

namespace conveyor::model {

/// The buckets for up to `slots` sequences: 1, 2, 4, then every multiple of 8, and `slots`
/// itself last (as vLLM does): at most 7 padding rows a step beyond 8 sequences, and few graphs.
class graph_bucket_table {
 public:
  explicit graph_bucket_table(int32_t slots);

  /// The smallest bucket that holds `n` sequences (1 <= n <= slots).
  int64_t bucket_of(int64_t n) const;

  /// Every bucket, ascending; the last is `slots`.
  const std::vector<int64_t>& buckets() const { return buckets_; }

 private:
  std::vector<int64_t> buckets_;
};

}  // namespace conveyor::model
