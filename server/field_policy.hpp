// Internal: which request fields the server knows, which of OpenAI's and vLLM's it refuses when
// they ask for behaviour Conveyor does not have, and the one-time log line for each unknown one.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "server/openai.hpp"
#include "server/request_fields.hpp"

namespace conveyor::server::detail {

/// Refuses (field_error naming it) every field that Conveyor does not apply when it asks for
/// more than the plain behaviour: vLLM's min_p, beam search,
/// guided decoding and the like. `logprobs`, `echo`, `top_logprobs`, `n`, `best_of` and `suffix`
/// are refused by the endpoint parsers themselves.
void refuse_unapplied(const json& obj, api_kind kind);

/// The names of `obj` that the endpoint `kind` does not know at all (ignored, as vLLM does).
std::vector<std::string> unknown_fields(const json& obj, api_kind kind);

/// Logs each unknown field name once per process (spdlog warn; thread-safe). At most
/// `max_names` distinct names are remembered; past that the names are no longer logged.
/// Returns the names it logged now.
std::vector<std::string> log_unknown_fields(const json& obj, api_kind kind,
                                            std::size_t max_names = 1024);

}  // namespace conveyor::server::detail
