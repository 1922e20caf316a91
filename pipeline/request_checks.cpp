// The pipeline's own checks of a request.
#include "pipeline/request_checks.hpp"

#include <sstream>

#include "common/deadline.hpp"

namespace conveyor::pipeline {

std::optional<std::string> check_request(const generation_params& p, double timeout_s) {
  if (p.max_tokens < 1) return "max_tokens must be at least 1, got " + std::to_string(p.max_tokens);
  if (!(p.temperature >= 0)) return std::string{"temperature must not be negative"};
  if (!(p.top_p > 0 && p.top_p <= 1)) return std::string{"top_p must be in (0, 1]"};
  if (p.top_k < 0) return std::string{"top_k must not be negative"};
  if (!(timeout_s >= 0)) return std::string{"timeout must not be negative"};
  // Beyond this, seconds in nanoseconds overflow the deadline, which would expire at once.
  if (timeout_s > max_timeout_s) {
    std::ostringstream out;
    out << "timeout must be at most " << int64_t(max_timeout_s) << " seconds (a year), got "
        << timeout_s;
    return out.str();
  }
  return std::nullopt;
}

}  // namespace conveyor::pipeline
