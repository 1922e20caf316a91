// The longest deadline Conveyor accepts, shared by the HTTP server, the pipeline's own checks
// and the config's validation.
#pragma once

namespace conveyor {

/// The longest deadline a request or `batcher.default_timeout_s` may set, in seconds (a year).
/// Far beyond any real request and far below what a nanosecond count in int64 holds (about
/// 292 years), so that arrival plus timeout never overflows.
inline constexpr double max_timeout_s = 365.0 * 24 * 60 * 60;

}  // namespace conveyor
