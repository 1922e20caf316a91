// The metrics as a JSON snapshot (GET /metrics?format=json, `conveyor bench`).
#pragma once

#include <string>

#include "pipeline/metrics.hpp"

namespace conveyor::pipeline {

/// A JSON object: `requests` (per outcome and `total`), `finish_reasons`, `tokens` (`prompt`,
/// `generation`, `per_second`), `prefix_cache` (`queries` and `hits` in prompt tokens,
/// `hit_rate`, null when nothing was looked up), `histograms` (per histogram `count`, `sum`,
/// `mean`, `p50`, `p90`, `p99`; `step_time_seconds` per kind; null where empty), `gauges`
/// (`queue_depth`, `running_sequences` and `executor_busy_ratio` per executor, `kv_blocks` per
/// executor with a block pool: `used`, `cached`, `free`) and `executors` (per executor its
/// `device`, null when unknown, and `steps`).
std::string json_snapshot(const metrics_registry& m);

}  // namespace conveyor::pipeline
