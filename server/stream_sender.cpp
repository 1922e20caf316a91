// One connection's event streams: the head, pacing with its timer, the end.
#include "server/stream_sender.hpp"

#include <utility>

namespace conveyor::server::detail {

stream_sender::stream_sender(response_writer& writer, const boost::asio::any_io_executor& strand,
                             std::size_t max_events, clock::duration max_delay,
                             std::size_t max_unsent_bytes, flush_handler flush, owner_handler owner)
    : writer_(writer),
      pacer_(max_events, max_delay),
      timer_(strand),
      max_unsent_bytes_(max_unsent_bytes),
      flush_(std::move(flush)),
      owner_(std::move(owner)) {
  writer_.hold_stream_until_released(pacer_.can_hold());
}

bool stream_sender::start(framing& how) {
  if (started_) return false;
  started_ = true;
  if (how.http10) how.keep_alive = false;
  writer_.queue_stream_head(how);
  return true;
}

void stream_sender::send(std::size_t events, bool opens_choice) {
  if (events == 0) return;
  if (pacer_.on_events(events, opens_choice, clock::now()) == stream_pacer::verdict::hold) {
    if (!timer_armed_) arm_timer(owner_());
    return;
  }
  release();
}

void stream_sender::end() {
  pacer_.release();
  writer_.queue_stream_end();
}

void stream_sender::reset() {
  started_ = false;
  pacer_.release();
}

void stream_sender::close() {
  pacer_.release();
  timer_.cancel();
}

void stream_sender::release() {
  pacer_.release();
  writer_.release_stream();
  flush_();
}

// One timer serves the stream: it is not cancelled when the events go out earlier, and on
// waking it waits again for a newer deadline.
void stream_sender::arm_timer(std::shared_ptr<void> owner) {
  timer_armed_ = true;
  timer_.expires_at(pacer_.deadline());
  timer_.async_wait([this, owner = std::move(owner)](boost::system::error_code ec) {
    timer_armed_ = false;
    if (ec || !pacer_.holding()) return;
    if (clock::now() < pacer_.deadline()) {
      arm_timer(owner);
      return;
    }
    release();
  });
}

}  // namespace conveyor::server::detail
