// Histograms and percentiles.
#include "pipeline/histogram.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace conveyor::pipeline {

namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// One step of splitmix64: a small, fast generator that is the same on every platform.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t reservoir_seed = 0x636f6e7665796f72ULL;  // "conveyor"

}  // namespace

// -- percentiles ---------------------------------------------------------------------------------

double percentile(std::vector<double> samples, double q) {
  if (samples.empty() || std::isnan(q)) return nan;
  q = std::clamp(q, 0.0, 100.0);
  auto rank = static_cast<double>(samples.size() - 1) * q / 100.0;
  auto lower = static_cast<std::size_t>(std::floor(rank));
  auto fraction = rank - static_cast<double>(lower);
  auto lower_pos = samples.begin() + static_cast<std::ptrdiff_t>(lower);
  std::nth_element(samples.begin(), lower_pos, samples.end());
  auto lower_value = *lower_pos;
  if (fraction == 0 || lower + 1 >= samples.size()) return lower_value;
  // After nth_element, the next rank is the smallest element behind `lower_pos`.
  auto upper_value = *std::min_element(lower_pos + 1, samples.end());
  return lower_value + fraction * (upper_value - lower_value);
}

// -- histogram -----------------------------------------------------------------------------------

histogram::histogram(std::vector<double> upper_bounds, std::size_t reservoir_capacity)
    : upper_bounds_(std::move(upper_bounds)),
      bucket_counts_(upper_bounds_.size() + 1, 0),
      reservoir_capacity_(reservoir_capacity),
      rng_state_(reservoir_seed) {
  for (std::size_t i = 0; i < upper_bounds_.size(); ++i) {
    if (!std::isfinite(upper_bounds_[i]) || (i > 0 && upper_bounds_[i - 1] >= upper_bounds_[i]))
      throw std::invalid_argument("histogram bounds must be finite and strictly ascending");
  }
}

void histogram::observe(double x) {
  if (std::isnan(x)) return;
  auto bucket = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), x);
  ++bucket_counts_[static_cast<std::size_t>(bucket - upper_bounds_.begin())];
  // Algorithm R: the n-th observation (0-based) replaces a random slot with probability
  // capacity / (n + 1), so the reservoir stays a uniform sample of everything observed.
  if (reservoir_.size() < reservoir_capacity_) {
    reservoir_.push_back(x);
  } else if (reservoir_capacity_ > 0) {
    auto slot = next_random(rng_state_) % (count_ + 1);
    if (slot < reservoir_capacity_) reservoir_[slot] = x;
  }
  ++count_;
  sum_ += x;
}

void histogram::reset() {
  std::fill(bucket_counts_.begin(), bucket_counts_.end(), 0);
  count_ = 0;
  sum_ = 0;
  reservoir_.clear();
  rng_state_ = reservoir_seed;
}

std::vector<uint64_t> histogram::cumulative_counts() const {
  std::vector<uint64_t> result(bucket_counts_.size());
  std::partial_sum(bucket_counts_.begin(), bucket_counts_.end(), result.begin());
  return result;
}

double histogram::mean() const noexcept {
  return count_ == 0 ? nan : sum_ / static_cast<double>(count_);
}

double histogram::percentile(double q) const {
  return pipeline::percentile(reservoir_, q);
}

}  // namespace conveyor::pipeline
