// The metrics as one log line.
#include "pipeline/metrics_log.hpp"

#include <cmath>
#include <cstdio>

namespace conveyor::pipeline {

namespace {

// Renders seconds for a log line: "12.3ms" below a second, "1.2s" above, "-" for NaN.
std::string format_seconds(double x) {
  if (std::isnan(x)) return "-";
  char buf[32];
  if (std::abs(x) < 1)
    std::snprintf(buf, sizeof(buf), "%.3gms", x * 1000);
  else
    std::snprintf(buf, sizeof(buf), "%.3gs", x);
  return buf;
}

// Renders a plain number with `format` (one double), or "-" for NaN.
std::string format_number(const char* format, double x) {
  if (std::isnan(x)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), format, x);
  return buf;
}

}  // namespace

std::string summary_line(const metrics_registry& m) {
  auto x = m.summarize();
  std::string out = "requests finished=" + std::to_string(x.finished);
  out += " cancelled=" + std::to_string(x.cancelled);
  out += " expired=" + std::to_string(x.expired);
  out += " rejected=" + std::to_string(x.rejected);
  out += " failed=" + std::to_string(x.failed);
  out += " | queue p50=" + format_seconds(x.queue_time_p50);
  out += " p99=" + format_seconds(x.queue_time_p99);
  out += " | ttft p50=" + format_seconds(x.ttft_p50);
  out += " p99=" + format_seconds(x.ttft_p99);
  out += " | itl mean=" + format_seconds(x.itl_mean);
  out += " | tpot p50=" + format_seconds(x.tpot_p50);
  out += " | e2e p50=" + format_seconds(x.e2e_p50);
  out += " p99=" + format_seconds(x.e2e_p99);
  out += " | batch mean=" + format_number("%.1f", x.batch_size_mean);
  out += " pad=" + format_number("%.1f%%", x.padding_fraction_mean * 100);
  out += " | tok/s=" + format_number("%.1f", x.tokens_per_second);
  out += " | kv used=" + format_number("%.1f%%", x.kv_cache_usage * 100);
  out += " prefix hit=" + format_number("%.1f%%", x.prefix_cache_hit_rate * 100);
  return out;
}

}  // namespace conveyor::pipeline
