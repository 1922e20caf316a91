// Internal: reading and validating the fields of OpenAI request bodies, shared by the
// completion and chat completion parsers. Failures throw field_error inside server/ only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai.hpp"

namespace conveyor::chat {
struct chat_message;
}  // namespace conveyor::chat

namespace conveyor::server::detail {

using json = nlohmann::json;

/// A refused field; turned into a body_error at the parsers' boundary.
struct field_error {
  std::string message;
  std::string param;
};

/// Throws field_error{message, param}.
[[noreturn]] void fail(std::string param, std::string message);

/// "'name'".
std::string quoted(std::string_view name);

/// JSON's name of the type of `j` ("string", "integer", ...).
const char* type_name_of(const json& j);

/// Dumps without throwing on invalid UTF-8.
std::string dump(const json& j);

/// The field, or nullptr when it is absent or null.
const json* find(const json& obj, const char* name);

/// An integer in [lo, hi]; a number with an integral value (10.0) counts as an integer.
std::optional<int64_t> get_integer(const json& obj, const char* name, int64_t lo, int64_t hi);

/// A number.
std::optional<double> get_number(const json& obj, const char* name);

/// A boolean.
std::optional<bool> get_bool(const json& obj, const char* name);

/// Up to 16 stop strings; empty strings are dropped.
std::vector<std::string> get_stop(const json& obj);

/// The sampling and scheduling fields every endpoint shares (temperature, top_p, top_k, seed,
/// stop, priority, timeout; max_tokens from `max_tokens_field`), absent ones from `defaults`.
completion_request parse_sampling(const json& obj, const completion_defaults& defaults,
                                  const char* max_tokens_field = "max_tokens");

/// `n`, the choices per prompt: an integer in [1, max_n] (`server.max_n`), 1 when absent.
std::size_t get_n(const json& obj, std::size_t max_n);

/// Appends `n` requests for one prompt to `body`: copies of `proto`, choice i with `seed` + i
/// when a seed is given (each choice its own generator; absent seeds stay absent, so that each
/// choice draws its own).
void add_choices(const completion_request& proto, std::size_t n, completion_body& body);

/// presence_penalty, frequency_penalty, repetition_penalty, logit_bias, stop_token_ids, min_tokens
/// (after max_tokens) and ignore_eos into `proto`; token ids are checked against
/// `defaults.vocab_size`.
void parse_logit_fields(const json& obj, const completion_defaults& defaults,
                        completion_request& proto);

/// What is wrong with `j` as a token id of a vocabulary of `vocab_size` ids (0: unknown), or "".
std::string token_id_problem(const json& j, int32_t vocab_size);

/// `j` as a token id, or a field_error on `param`.
int32_t get_token_id(const json& j, int32_t vocab_size, const std::string& param);

/// The `messages` of a chat body, checked as `parse_chat_body` checks them.
std::vector<chat::chat_message> read_messages(const json& obj);

/// `stream` and `stream_options.include_usage` into `body`.
void parse_stream(const json& obj, completion_body& body);

/// Parses `body` as a JSON object: a body_error for invalid JSON or another type.
std::optional<body_error> parse_json_object(std::string_view body, json& obj);

}  // namespace conveyor::server::detail
