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

namespace {

std::string range_problem(double value, double lo, double hi) {
  if (value >= lo && value <= hi) return {};
  return "must be between " + display_real(lo) + " and " + display_real(hi) + ", got " +
         display_real(value);
}

}  // namespace

std::string penalty_problem(double value) {
  return range_problem(value, sampling_limits::min_penalty, sampling_limits::max_penalty);
}

std::string repetition_penalty_problem(double value) {
  if (value > 0 && value <= sampling_limits::max_repetition_penalty) return {};
  return "must be greater than 0 and at most " +
         display_real(sampling_limits::max_repetition_penalty) + ", got " + display_real(value);
}

std::string logit_bias_problem(double value) {
  return range_problem(value, -sampling_limits::max_abs_logit_bias,
                       sampling_limits::max_abs_logit_bias);
}

std::string min_tokens_problem(int64_t value, int64_t max_tokens) {
  if (value < 0) return "must be at least 0, got " + std::to_string(value);
  if (value > max_tokens)
    return "must be at most max_tokens (" + std::to_string(max_tokens) + "), got " +
           std::to_string(value);
  return {};
}

}  // namespace conveyor
