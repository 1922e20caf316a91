// The remote connector: connect, attach, monitor, and on refusal or loss try again later.
#include "actors/remote_connector.hpp"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include "common/host_port.hpp"

namespace conveyor {

namespace {

struct connector_state {
  static inline const char* name = "remote_connector";
  std::string address;
  std::string host;
  uint16_t port = 0;
  batcher_actor batcher;
  reconnect_backoff backoff;
  /// Seconds until the next attempt after a failure.
  double delay_s = 0;
  worker_actor worker;
  /// Failed attempts in a row (the first one is logged as an error, later ones quieter).
  uint64_t failures = 0;
};

using connector_pointer = connector_actor::stateful_pointer<connector_state>;

void retry_later(connector_pointer self, const std::string& why) {
  auto& st = self->state;
  ++st.failures;
  // Loud on the first failure, then at most one warning per back-off ceiling.
  if (st.failures == 1 || st.delay_s >= st.backoff.max_s)
    spdlog::warn("worker {}: {}; retrying in {:.1f} s", st.address, why, st.delay_s);
  else
    spdlog::debug("worker {}: {}; retrying in {:.1f} s", st.address, why, st.delay_s);
  const auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(st.delay_s));
  self->delayed_send(self, delay, atom::connect::value);
  st.delay_s = std::min(st.delay_s * 2, st.backoff.max_s);
}

void try_connect(connector_pointer self) {
  auto& st = self->state;
  if (st.worker) return;
  auto worker = self->system().middleman().remote_actor<worker_actor>(st.host, st.port);
  if (!worker) {
    retry_later(self, "cannot connect: " + self->system().render(worker.error()));
    return;
  }
  st.worker = std::move(*worker);
  self->monitor(st.worker);
  self->request(st.worker, std::chrono::seconds(30), atom::attach::value, st.batcher)
      .then(
          [=](int32_t executors) {
            auto& st = self->state;
            spdlog::info("worker {}: connected, {} executor(s) pull from this server", st.address,
                         executors);
            st.failures = 0;
            st.delay_s = st.backoff.initial_s;
          },
          [=](caf::error& err) {
            auto& st = self->state;
            if (!st.worker) return;  // lost meanwhile: the down handler retries
            self->demonitor(st.worker.address());
            st.worker = nullptr;
            retry_later(self, "attach failed: " + self->system().render(err));
          });
}

connector_actor::behavior_type connector(connector_pointer self, std::string address,
                                         batcher_actor batcher, reconnect_backoff backoff) {
  auto& st = self->state;
  st.address = std::move(address);
  st.batcher = std::move(batcher);
  st.backoff = backoff;
  st.delay_s = backoff.initial_s;
  auto address_parts = parse_host_port(st.address);
  if (!address_parts) {
    // The configuration checks cluster.remote: this is for embedding code that does not.
    spdlog::error("worker {}: not a host:port address", st.address);
    self->quit();
    return {[](atom::connect) {}};
  }
  st.host = address_parts->host;
  st.port = address_parts->port;
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    if (!st.worker || dm.source != st.worker.address()) return;
    st.worker = nullptr;
    spdlog::error("worker {}: lost ({}); reconnecting", st.address,
                  self->system().render(dm.reason));
    st.failures = 0;
    st.delay_s = st.backoff.initial_s;
    retry_later(self, "lost");
  });
  self->send(self, atom::connect::value);
  return {
      [=](atom::connect) { try_connect(self); },
  };
}

}  // namespace

connector_actor spawn_remote_connector(caf::actor_system& system, std::string address,
                                  batcher_actor batcher, reconnect_backoff backoff) {
  return system.spawn<caf::detached>(connector, std::move(address), std::move(batcher), backoff);
}

}  // namespace conveyor
