// The worker front: hands a server's batcher to every executor of this process.
#include "actors/worker_actor.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

namespace conveyor {

namespace {

worker_actor::behavior_type worker_front(worker_actor::pointer self,
                                         std::vector<executor_actor> executors) {
  return {
      [=](atom::attach, const batcher_actor& batcher) -> int32_t {
        spdlog::info("worker: batcher {} attached; {} executor(s) pull from it",
                     caf::to_string(batcher.address()), executors.size());
        for (const auto& e : executors)
          self->send(e, atom::attach::value, batcher_ref{batcher});
        return int32_t(executors.size());
      },
  };
}

}  // namespace

worker_actor spawn_worker_front(caf::actor_system& system, std::vector<executor_actor> executors) {
  return system.spawn(worker_front, std::move(executors));
}

}  // namespace conveyor
