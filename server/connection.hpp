// Internal: starting one HTTP connection. The connection itself (its state machine, reading,
// disconnect watching, closing) lives in connection.cpp; it writes through response_writer and
// stream_sender, and the backend's answers reach it through event_poster.
#pragma once

#include "server/server_state.hpp"

namespace conveyor::server::detail {

/// Why an accepted connection is refused, if it is.
enum class refusal {
  /// Served.
  none,
  /// `max_connections` are open: 503 `too_many_connections`.
  server_full,
  /// `max_connections_per_address` are open from its address: 429
  /// `too_many_connections_per_address`.
  address_full,
};

/// Starts serving an accepted socket (whose executor is its own strand) from client `address`.
/// A refused connection only answers its error (with Retry-After) and closes.
void start_connection(server_state& state, tcp::socket socket, const std::string& address,
                      refusal why);

}  // namespace conveyor::server::detail
