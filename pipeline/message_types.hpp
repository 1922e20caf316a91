// The types that cross the network between a server and its `conveyor worker`s.
#pragma once

#include <caf/fwd.hpp>

namespace conveyor {

/// Registers every message type of the pipeline that may travel between nodes (both nodes must
/// register them; CAF drops unknown types with "cannot serialize message"). Call it on the
/// actor_system_config of every program that loads the middleman: serve, worker, bench, tests.
void add_message_types(caf::actor_system_config& cfg);

}  // namespace conveyor
