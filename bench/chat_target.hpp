// `conveyor bench --target` with a chat workload: conversations through POST
// /v1/chat/completions (stream: true, usage in the last chunk), each turn sent with the
// conversation so far, the replies the server gave in this run included. Conversations start in
// open loop; the turns of one conversation follow each other.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/chat_workload.hpp"
#include "bench/http_target.hpp"
#include "bench/stats.hpp"

namespace conveyor::bench {

// -- one turn's request --------------------------------------------------------------------------

/// The messages of turn `replies.size() + 1` of `c` (`replies` holds the replies to the turns
/// before it, at most one fewer than its user messages): the system prompt (when not empty),
/// then each earlier turn's user message and reply, then this turn's user message.
nlohmann::json turn_messages(const conversation& c, const std::vector<std::string>& replies);

/// The body of that turn's request: `messages`, `max_tokens`, `"stream": true`,
/// `"stream_options": {"include_usage": true}`, `model` when set, and the sampling fields
/// (`add_to_body`).
std::string chat_request_body(const conversation& c, const std::vector<std::string>& replies,
                              const target_options& options);

// -- the driver ----------------------------------------------------------------------------------

/// Replays `conversations` against the server: conversation i's first turn is sent at t0 +
/// arrival_s whatever the others are doing; each later turn `think_time_s` seconds after the
/// reply to the one before ended, with that reply as the assistant's message. Every turn has a
/// connection of its own on the client's event loops (the turns of one conversation on the same
/// one). A turn that does not complete ends its conversation: the turns after it are failed,
/// never sent. Returns when every turn has ended, one record per turn (`turn` set, 1 first),
/// conversation by conversation, and sets `timing`; a turn's times are seconds after it was
/// sent.
std::vector<request_record> run_chat_target(const chat_workload& conversations,
                                            const target_options& options, double think_time_s,
                                            run_progress& progress, run_timing& timing);

}  // namespace conveyor::bench
