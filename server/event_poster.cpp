// The backend's answers posted onto a connection's strand.
#include "server/event_poster.hpp"

#include <mutex>
#include <utility>

#include <boost/asio/post.hpp>

namespace conveyor::server::detail {

event_poster::event_poster(std::shared_ptr<post_gate> gate, std::weak_ptr<event_target> target)
    : gate_(std::move(gate)), target_(std::move(target)) {}

template <class F>
void event_poster::post(F fn) const {
  // The gate stays locked until the target is handed to the strand, so the io_context cannot be
  // destroyed in between.
  std::lock_guard<std::mutex> lock{gate_->mutex};
  if (!gate_->open) return;
  auto target = target_.lock();
  if (!target) return;
  auto ex = target->executor();
  net::post(ex, [target = std::move(target), fn = std::move(fn)]() mutable { fn(*target); });
}

completion_events event_poster::choice_events(uint64_t serial, std::size_t index) const {
  completion_events events;
  events.on_step = [poster = *this, serial, index](completion_step step) {
    poster.post([serial, index, step = std::move(step)](event_target& t) mutable {
      t.on_step(serial, index, std::move(step));
    });
  };
  return events;
}

std::function<void(std::string text)> event_poster::metrics_reply(uint64_t serial) const {
  return [poster = *this, serial](std::string text) {
    poster.post([serial, text = std::move(text)](event_target& t) mutable {
      t.on_metrics(serial, std::move(text));
    });
  };
}

}  // namespace conveyor::server::detail
