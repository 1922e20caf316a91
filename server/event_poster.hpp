// Internal: the backend's answers to one connection's requests, carried from the backend's
// threads onto the connection's strand: each step of a completion's choices, and the metrics
// text of `GET /metrics`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "server/backend.hpp"
#include "server/server_state.hpp"

namespace conveyor::server::detail {

/// What the backend's answers reach of a connection: its strand and its handlers there.
class event_target {
 public:
  virtual ~event_target() = default;

  /// The strand the handlers run on; immutable, so any thread may read it.
  virtual const net::any_io_executor& executor() const = 0;

  /// One step of choice `index` of the completion `serial` (the connection checks that it is
  /// still the one it answers).
  virtual void on_step(uint64_t serial, std::size_t index, completion_step step) = 0;

  /// The backend's metrics text, for the metrics request `serial`.
  virtual void on_metrics(uint64_t serial, std::string text) = 0;
};

/// Hands the backend's answers to a target on the target's strand, from any thread, while the
/// server lives (its `post_gate` is open) and the target exists; afterwards they are dropped.
/// The posted call keeps the target alive until it ran.
class event_poster {
 public:
  /// Posts to `target` while `gate` is open.
  event_poster(std::shared_ptr<post_gate> gate, std::weak_ptr<event_target> target);

  /// The events of choice `index` of the completion `serial`: each step goes to `on_step`.
  completion_events choice_events(uint64_t serial, std::size_t index) const;

  /// A `collect_metrics` reply for the metrics request `serial`: the text goes to `on_metrics`.
  std::function<void(std::string text)> metrics_reply(uint64_t serial) const;

 private:
  template <class F>
  void post(F fn) const;

  std::shared_ptr<post_gate> gate_;
  std::weak_ptr<event_target> target_;
};

}  // namespace conveyor::server::detail
