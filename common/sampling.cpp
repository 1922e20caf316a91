// The limits of the sampling fields.
#include "common/sampling.hpp"

#include <charconv>
#include <cmath>

namespace conveyor {

std::string display_real(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), x);
  return std::string(buf, res.ptr);
}

namespace {

std::string integer_problem(int64_t value, int64_t lo, int64_t hi) {
  if (value < lo) return "must be at least " + std::to_string(lo) + ", got " + std::to_string(value);
  if (value > hi) return "must be at most " + std::to_string(hi) + ", got " + std::to_string(value);
  return {};
}

}  // namespace

std::string max_tokens_problem(int64_t value) {
  return integer_problem(value, sampling_limits::min_max_tokens, sampling_limits::max_max_tokens);
}

std::string temperature_problem(double value) {
  if (value >= sampling_limits::min_temperature && value <= sampling_limits::max_temperature)
    return {};
  return "must be between " + display_real(sampling_limits::min_temperature) + " and " +
         display_real(sampling_limits::max_temperature) + ", got " + display_real(value);
}

std::string top_p_problem(double value) {
  if (value > sampling_limits::min_top_p_exclusive && value <= sampling_limits::max_top_p) return {};
  return "must be greater than " + display_real(sampling_limits::min_top_p_exclusive) +
         " and at most " + display_real(sampling_limits::max_top_p) + ", got " + display_real(value);
}

std::string top_k_problem(int64_t value) {
  return integer_problem(value, sampling_limits::min_top_k, sampling_limits::max_top_k);
}

}  // namespace conveyor
