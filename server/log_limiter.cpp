// Rate-limiting a repeated log line.
#include "server/log_limiter.hpp"

namespace conveyor::server::detail {

std::optional<log_limiter::line> log_limiter::note(clock::time_point now) {
  if (last_line_ && now - *last_line_ < interval_) {
    held_ += 1;
    return std::nullopt;
  }
  line result{held_ + 1, last_line_ ? now - *last_line_ : clock::duration{}};
  held_ = 0;
  last_line_ = now;
  return result;
}

std::optional<log_limiter::line> log_limiter::flush(clock::time_point now) {
  if (held_ == 0 || !last_line_ || now - *last_line_ < interval_) return std::nullopt;
  line result{held_, now - *last_line_};
  held_ = 0;
  last_line_ = now;
  return result;
}

}  // namespace conveyor::server::detail
