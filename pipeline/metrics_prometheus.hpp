// The metrics in the Prometheus text exposition format.
#pragma once

#include <string>

#include "pipeline/metrics.hpp"

namespace conveyor::pipeline {

/// Everything in the Prometheus text exposition format 0.0.4, names `conveyor_*`, times in
/// seconds. Every series appears from the start (zero-valued), so scrapes see no gaps; each
/// known executor has every executor series.
std::string prometheus_text(const metrics_registry& m);

}  // namespace conveyor::pipeline
