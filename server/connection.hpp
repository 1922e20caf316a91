// Internal: starting one HTTP connection. The connection itself (its state machine, reading,
// writing, disconnect watching) lives in connection.cpp.
#pragma once

#include "server/server_state.hpp"

namespace conveyor::server::detail {

/// Starts serving an accepted socket (whose executor is its own strand). With `reject`, the
/// connection only answers 503 (too many connections) and closes.
void start_connection(server_state& state, tcp::socket socket, bool reject);

}  // namespace conveyor::server::detail
