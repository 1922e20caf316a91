// The Prometheus text exposition format (version 0.0.4): the one writer of it, for the pipeline's
// metrics and the HTTP server's own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::prometheus {

/// A sample value as Prometheus (and Go's ParseFloat) reads it: integers without a fraction,
/// others in the shortest form that round-trips, and +Inf, -Inf, NaN.
std::string format_value(double x);

/// A label value with backslash, double quote and line feed escaped.
std::string escape_label_value(std::string_view x);

/// `{name="value"}`, or "" for an empty name.
std::string label(std::string_view name, std::string_view value);

/// `{a="1",b="2"}` from name and value pairs; "" for none.
std::string labels(const std::vector<std::pair<std::string_view, std::string_view>>& pairs);

/// Writes the `# HELP` and `# TYPE` lines of a metric family. Help texts must hold neither
/// backslashes nor line feeds, the two characters HELP would need escaped.
void write_header(std::string& out, std::string_view name, std::string_view help,
                  std::string_view type);

/// Writes one sample line: `name{labels} value`; `labels` as `label` or `labels` render them.
void write_sample(std::string& out, std::string_view name, std::string_view labels, double value);

/// Writes one sample line with an integer value (exact beyond 2^53).
void write_sample(std::string& out, std::string_view name, std::string_view labels,
                  uint64_t value);

/// Writes a counter family of one unlabelled sample.
void write_counter(std::string& out, std::string_view name, std::string_view help, uint64_t value);

/// Writes the series of one histogram: cumulative buckets (`cumulative[i]` counts observations
/// <= `upper_bounds[i]`, the last element the +Inf bucket), then `_sum` and `_count`. One extra
/// label when `label_name` is not empty.
void write_histogram_series(std::string& out, std::string_view name,
                            const std::vector<double>& upper_bounds,
                            const std::vector<uint64_t>& cumulative, double sum, uint64_t count,
                            std::string_view label_name = {}, std::string_view label_value = {});

}  // namespace conveyor::prometheus
