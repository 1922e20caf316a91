// Seeded random numbers and synthetic text for made workloads: the bench's own generators (not
// std::*_distribution, whose results vary by standard library), so that a seed gives the same
// workload on any machine.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace conveyor::bench {

/// Uniform in [0, 1) from the top 53 bits of one draw.
double uniform01(std::mt19937_64& rng);

/// Uniform integer in [lo, hi]; one draw.
int64_t uniform_int(std::mt19937_64& rng, int64_t lo, int64_t hi);

/// Log-uniform integer in [lo, hi] (lo >= 1): floor of exp(U[log lo, log(hi + 1))); one draw.
int64_t log_uniform_int(std::mt19937_64& rng, int64_t lo, int64_t hi);

/// An exponential gap of mean 1 / rate (Poisson arrivals); one draw.
double exponential_gap(std::mt19937_64& rng, double rate);

/// One sentence of `words` words (>= 1) drawn from a small children's-story vocabulary (so that
/// tok512 encodes it in few tokens), the first capitalized, ending in '.'.
std::string make_sentence(std::mt19937_64& rng, int64_t words);

/// Sentences of about 6 to 14 words until the text holds `tokens` words and full stops together
/// (exactly, for `tokens` >= 2; about `tokens` tokens for the BPE tokenizer of a real model,
/// where each of these words and each full stop is one token; tok512 splits some words). Empty
/// for `tokens` <= 0.
std::string make_text(std::mt19937_64& rng, int64_t tokens);

}  // namespace conveyor::bench
