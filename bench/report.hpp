// The reports of a benchmark: a text table, a JSON document and self-contained SVG charts.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/stats.hpp"

namespace conveyor::bench {

/// The runs side by side, one column per run and one row per number; latencies in
/// milliseconds as "mean / p50 / p90 / p99"; "-" where there is no number.
std::string render_table(const std::vector<run_summary>& runs);

/// One run as JSON (see docs/bench.md for the schema); NaN becomes null.
nlohmann::json to_json(const run_summary& run);

/// The whole report: {"version": 1, "settings": settings, "runs": [to_json(run), ...]}.
nlohmann::json to_json(const std::vector<run_summary>& runs, const nlohmann::json& settings);

/// An SVG chart of the E2E latency CDF: one polyline per run (x: seconds, y: fraction of
/// completed requests), axes with ticks and labels, a legend. Runs without completed requests
/// get a legend entry and no line.
std::string render_cdf_svg(const std::vector<run_summary>& runs, const std::string& title);

/// An SVG chart of E2E latency against arrival rate: per run name one polyline through its p50
/// (solid) and one through its p99 (dashed), a point per rate. Runs with an infinite rate are
/// left out.
std::string render_rate_svg(const std::vector<run_summary>& runs, const std::string& title);

/// "1.5 ms", "12.3 s": seconds in a readable unit.
std::string format_duration(double seconds);

/// Tick positions for an axis from 0 to about `max`: 0, step, 2 step, ... with step 1, 2 or 5
/// times a power of ten, the last tick >= max.
std::vector<double> axis_ticks(double max, int target_count = 5);

}  // namespace conveyor::bench
