// One 64-bit hash step for keys built from a sequence of words (token ids, ids of executors).
#pragma once

#include <cstdint>

namespace conveyor {

/// The running hash `h` with the next word `x` mixed in: a boost-style combine, then splitmix64's
/// finalizer, so that every bit of `x` reaches every bit of the result.
inline uint64_t hash_mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

}  // namespace conveyor
