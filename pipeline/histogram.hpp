// Histograms with fixed buckets and a reservoir of samples for percentiles; percentiles of a
// sample.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace conveyor::pipeline {

// -- percentiles ---------------------------------------------------------------------------------

/// Returns the `q`-th percentile of `samples`, `q` in [0, 100] (clamped), with numpy's default
/// definition ("linear"): sort the n samples into x[0..n-1], let h = (n - 1) * q / 100, and
/// interpolate linearly between the closest ranks: x[floor(h)] + (h - floor(h)) *
/// (x[floor(h) + 1] - x[floor(h)]). E.g. for {1, ..., 10}: p50 = 5.5, p90 = 9.1, p99 = 9.91.
/// One sample is every percentile. Returns NaN when `samples` is empty or `q` is NaN. The
/// samples must not contain NaN. Runs in O(n) (selection, no full sort).
double percentile(std::vector<double> samples, double q);

// -- histogram -----------------------------------------------------------------------------------

/// A Prometheus-style histogram with fixed bucket bounds, plus a bounded reservoir of raw
/// samples for percentiles.
///
/// Buckets, `count` and `sum` are exact over every observation, so `mean` is exact. Percentiles
/// come from a uniform random sample of the observations (reservoir sampling, Vitter's algorithm
/// R, with a fixed seed so runs are reproducible): exact while `count() <= reservoir_capacity`,
/// an unbiased estimate of the whole history after that. Not thread-safe.
class histogram {
 public:
  // -- constants ---------------------------------------------------------------------------------

  /// The default number of raw samples a histogram keeps for percentiles (32 KiB).
  static constexpr std::size_t default_reservoir_capacity = 4096;

  // -- constructors ------------------------------------------------------------------------------

  /// Makes an empty histogram with the given finite upper bounds (strictly ascending; the
  /// `+Inf` bucket is implied) and a reservoir of `reservoir_capacity` samples.
  explicit histogram(std::vector<double> upper_bounds,
                     std::size_t reservoir_capacity = default_reservoir_capacity);

  // -- modifiers ---------------------------------------------------------------------------------

  /// Adds one observation. NaN is ignored.
  void observe(double x);

  /// Forgets every observation; keeps the bounds and the capacity.
  void reset();

  // -- observers ---------------------------------------------------------------------------------

  /// The finite upper bounds of the buckets (inclusive: `x <= bound`), ascending.
  const std::vector<double>& upper_bounds() const noexcept { return upper_bounds_; }

  /// The cumulative bucket counts as Prometheus exposes them: element i counts observations
  /// `<= upper_bounds()[i]`; one more last element, the `+Inf` bucket, equals `count()`.
  std::vector<uint64_t> cumulative_counts() const;

  /// The number of observations.
  uint64_t count() const noexcept { return count_; }

  /// The sum of the observations.
  double sum() const noexcept { return sum_; }

  /// The exact mean of the observations; NaN when there are none.
  double mean() const noexcept;

  /// The `q`-th percentile (`q` in [0, 100]) of the reservoir as `pipeline::percentile` defines
  /// it; NaN when there are no observations.
  double percentile(double q) const;

  /// The raw samples kept for percentiles, in no particular order.
  const std::vector<double>& reservoir() const noexcept { return reservoir_; }

 private:
  std::vector<double> upper_bounds_;
  // Per bucket (not cumulative); one more than `upper_bounds_`, the last is the +Inf bucket.
  std::vector<uint64_t> bucket_counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
  std::size_t reservoir_capacity_;
  std::vector<double> reservoir_;
  uint64_t rng_state_;
};

}  // namespace conveyor::pipeline
