// The fields that ask for an output format: OpenAI's `response_format` and vLLM's
// `structured_outputs` (and its older `guided_json`, `guided_regex`, `guided_choice`,
// `guided_grammar`).
#pragma once

#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/backend.hpp"

#include "sampling/structured_output.hpp"

namespace conveyor::server::detail {

/// The output format a body asks for, none when it asks for none. Checks the fields' shapes
/// (a field_error naming the field otherwise): `response_format` {"type": "text"} (free),
/// {"type": "json_object"} (any JSON object) or {"type": "json_schema", "json_schema": {"name",
/// "schema", "strict", "description"}}; `structured_outputs` with exactly one of `json` (a
/// schema: an object or a boolean, or its text), `regex`, `choice` (a non-empty array of
/// strings), `grammar` (xgrammar's EBNF) or `json_object` true; at most one of all of these.
/// Whether the engine can compile the format is decided later, off the server's threads.
sampling::structured_output parse_output_format(const nlohmann::json& obj);

/// Gives the JSON schema of `body`'s requests (their `constraint`, parsed by parse_output_format)
/// the order of the keys as the client wrote them: the parsed body sorts object keys, but the
/// order of a schema's properties is the order in which the output writes them.
void keep_schema_order(std::string_view body, std::vector<completion_request>& requests);

}  // namespace conveyor::server::detail
