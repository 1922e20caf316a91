#include "bench/random_text.hpp"

#include <algorithm>
#include <cmath>

namespace conveyor::bench {

namespace {

// Words of the TinyStories world, so that tok512 encodes prompts in few tokens.
constexpr const char* vocabulary[] = {
    "once",   "upon",   "a",      "time",   "there", "was",   "little",  "girl",  "named",
    "lily",   "boy",    "tom",    "she",    "he",    "loved", "to",      "play",  "with",
    "her",    "his",    "toy",    "ball",   "red",   "big",   "dog",     "cat",   "in",
    "the",    "park",   "one",    "day",    "they",  "went",  "outside", "and",   "saw",
    "bird",   "tree",   "happy",  "sad",    "mom",   "said",  "friend",  "sun",   "sky",
    "fun",    "found",  "box",    "wanted", "share", "jump",  "run",     "very",  "home",
    "garden", "flower", "smiled", "hug",    "car",   "blue",  "small",   "funny", "nice"};
constexpr std::size_t vocabulary_size = sizeof(vocabulary) / sizeof(vocabulary[0]);

}  // namespace

double uniform01(std::mt19937_64& rng) {
  return double(rng() >> 11) * (1.0 / 9007199254740992.0);
}

int64_t uniform_int(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  auto x = lo + int64_t(uniform01(rng) * double(hi - lo + 1));
  return std::min(x, hi);
}

int64_t log_uniform_int(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  const double a = std::log(double(lo)), b = std::log(double(hi + 1));
  auto x = int64_t(std::floor(std::exp(a + uniform01(rng) * (b - a))));
  return std::clamp(x, lo, hi);
}

double exponential_gap(std::mt19937_64& rng, double rate) {
  return -std::log(1.0 - uniform01(rng)) / rate;
}

std::string make_sentence(std::mt19937_64& rng, int64_t words) {
  std::string out;
  for (int64_t i = 0; i < words; ++i) {
    std::string w = vocabulary[uniform_int(rng, 0, int64_t(vocabulary_size) - 1)];
    if (i == 0) w[0] = char(w[0] - 'a' + 'A');
    if (!out.empty()) out += ' ';
    out += w;
  }
  out += '.';
  return out;
}

std::string make_text(std::mt19937_64& rng, int64_t tokens) {
  std::string out;
  while (tokens > 0) {
    // A sentence costs its words and its full stop; the last one is cut to what is left, and
    // one is never left over (no sentence of no words).
    int64_t words = std::min(uniform_int(rng, 6, 14), std::max<int64_t>(tokens - 1, 1));
    if (tokens - (words + 1) == 1) ++words;
    if (!out.empty()) out += ' ';
    out += make_sentence(rng, words);
    tokens -= words + 1;
  }
  return out;
}

}  // namespace conveyor::bench
