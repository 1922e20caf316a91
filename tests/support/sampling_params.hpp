// A request's sampling in one line, for the tests of the sampler and its log-probabilities.
#pragma once

#include <cstdint>

#include "sampling/sampling_params.hpp"

namespace conveyor::test {

/// Sampling at `temperature` with `top_p`, `top_k` and `seed`; the other fields their defaults.
inline sampling::sampling_params sampling_of(float temperature, float top_p, int32_t top_k,
                                             uint64_t seed) {
  sampling::sampling_params p;
  p.temperature = temperature;
  p.top_p = top_p;
  p.top_k = top_k;
  p.seed = seed;
  return p;
}

}  // namespace conveyor::test
