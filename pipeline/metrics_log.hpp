// The metrics as one log line.
#pragma once

#include <string>

#include "pipeline/metrics.hpp"

namespace conveyor::pipeline {

/// The main numbers on one line, e.g. "requests finished=120 cancelled=0 expired=0 rejected=3
/// failed=0 | queue p50=1.2ms p99=3.4ms | ttft p50=12ms p99=40ms | itl mean=2.1ms | tpot
/// p50=2ms | e2e p50=450ms p99=1.2s | batch mean=7.5 pad=12.0% | tok/s=1234.5 | kv used=31.2%
/// prefix hit=64.0%": kv used is `summary::kv_cache_usage`, prefix hit
/// `summary::prefix_cache_hit_rate` ("-" when no executor has a block pool, or nothing was looked
/// up in a prefix cache).
std::string summary_line(const metrics_registry& m);

}  // namespace conveyor::pipeline
