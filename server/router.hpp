// Internal: which endpoint a request goes to, and the endpoints' answers that need no backend
// round trip. No sockets: the connection asks and writes what it gets.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "server/openai.hpp"
#include "server/response_writer.hpp"

namespace conveyor::server::detail {

/// The endpoints the server answers.
enum class endpoint {
  /// `POST /v1/completions`.
  completions,
  /// `POST /v1/chat/completions` (a 400 when the model has no chat template).
  chat_completions,
  /// `GET /v1/models`.
  models,
  /// `GET /health`.
  health,
  /// `GET /metrics`.
  metrics,
  /// `POST /tokenize` (vLLM's).
  tokenize,
  /// `POST /detokenize` (vLLM's).
  detokenize,
};

/// An error answer in OpenAI's shape: `{"error": {message, type, param, code}}`.
struct error_answer {
  /// HTTP status.
  unsigned status = 400;
  /// OpenAI's error `type`.
  std::string type = "invalid_request_error";
  /// What is wrong, for humans.
  std::string message;
  /// The offending field; empty renders as null.
  std::string param;
  /// A machine-readable code; empty renders as null.
  std::string code;
  /// More header fields (e.g. Allow).
  std::vector<header_field> extra;
};

/// Routes `method` and `target` (the query string is ignored): the endpoint, or a 404 (no such
/// endpoint) or 405 (with Allow) answer.
std::variant<endpoint, error_answer> route(http::verb method, std::string_view method_name,
                                           std::string_view target);

/// The 400 that refuses chat for a model without a chat template: `refusal` says why.
error_answer chat_refused(std::string_view refusal);

/// `GET /health`: status and body; 503 while draining or not ready.
std::pair<unsigned, std::string> health_answer(bool ready, bool draining);

/// What a completion request needs from the server to be read.
struct request_context {
  /// The one model served: a request naming another gets 404 `model_not_found`.
  std::string_view served_model;
  /// Values of absent fields.
  completion_defaults defaults;
  /// The chat template (chat requests only); null refuses chat with a 400 saying `chat_refusal`.
  const chat::chat_template* chat_template = nullptr;
  std::string_view chat_refusal;
  /// The template of conversations with tools, when the model has one for them; null:
  /// `chat_template` serves them.
  const chat::chat_template* tool_chat_template = nullptr;
  /// The parser of the model's tool calls (model.tool_call_parser); empty refuses tool_choice
  /// "auto".
  std::string_view tool_call_parser;
  /// Most prompts in a prompt array.
  std::size_t max_prompts = 64;
  /// Most choices per prompt (`n`).
  std::size_t max_n = 16;
};

/// Reads the body of a completion or chat completion request: a 400 naming the field when it
/// is invalid, a 404 `model_not_found` when it names a model that is not served.
std::variant<completion_body, error_answer> read_completion_request(std::string_view body,
                                                                    api_kind kind,
                                                                    const request_context& ctx);

}  // namespace conveyor::server::detail
