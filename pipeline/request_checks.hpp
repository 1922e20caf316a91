// The checks of a request's generation parameters that the pipeline itself makes, for callers
// that embed it without the HTTP server (which checks the client's fields first).
#pragma once

#include <optional>
#include <string>

#include "pipeline/request.hpp"

namespace conveyor::pipeline {

/// The problem with `params` and `timeout_s` (seconds, 0 for the default, at most
/// `max_timeout_s`), or nullopt when the pipeline can run them.
std::optional<std::string> check_request(const generation_params& params, double timeout_s);

}  // namespace conveyor::pipeline
