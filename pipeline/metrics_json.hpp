// The metrics as a JSON snapshot (GET /metrics?format=json, `conveyor bench`).
#pragma once

#include <string>

#include "pipeline/metrics.hpp"

namespace conveyor::pipeline {

/// A JSON object: `requests` (per outcome and `total`), `finish_reasons`, `tokens` (`prompt`,
/// `generation`, `per_second`), `histograms` (per histogram `count`, `sum`, `mean`, `p50`,
/// `p90`, `p99`; `step_time_seconds` per kind; null where empty), `gauges` (`queue_depth`,
/// `running_sequences` and `executor_busy_ratio` per executor) and `executors` (per executor
/// its `device`, null when unknown, and `steps`).
std::string json_snapshot(const metrics_registry& m);

}  // namespace conveyor::pipeline
