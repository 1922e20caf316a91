// How much work a thread must get before a loop of the CPU network is split across threads.
#pragma once

#include <algorithm>
#include <cstdint>

namespace conveyor::kernels {

/// Multiply-adds (or elements) a piece of a loop must have before the loop is split across the
/// compute pool (kernels/work_pool.hpp). Each split wakes workers and waits for their last piece;
/// on a machine whose cores also run the server's I/O, the actors and perhaps the client, only
/// loops worth tens of microseconds per piece are split (docs/benchmarks.md).
inline constexpr int64_t min_work_per_thread = int64_t{1} << 19;

/// The grain (items per task) for items of `cost` each.
inline int64_t grain_for(int64_t cost) {
  return std::max<int64_t>(1, min_work_per_thread / std::max<int64_t>(cost, 1));
}

}  // namespace conveyor::kernels
