// The stream pacer's rule (see stream_pacer.hpp).
#include "server/stream_pacer.hpp"

namespace conveyor::server {

stream_pacer::stream_pacer(std::size_t max_events, clock::duration max_delay)
    : max_events_(max_events), max_delay_(max_delay) {}

stream_pacer::verdict stream_pacer::on_events(std::size_t events, bool opens,
                                              clock::time_point now) {
  const auto gap = now - last_arrival_;
  last_arrival_ = now;
  const bool was_holding = waiting_ > 0;
  waiting_ += events;
  const bool write = opens || !can_hold() || waiting_ >= max_events_ || gap * 2 >= max_delay_ ||
                     (was_holding && now - oldest_ >= max_delay_);
  if (write) {
    waiting_ = 0;
    return verdict::write;
  }
  if (!was_holding) oldest_ = now;
  return verdict::hold;
}

}  // namespace conveyor::server
