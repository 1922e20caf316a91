// OpenAI's completion and chat completion APIs as plain functions: validating request bodies
// and rendering whole completions, log-probabilities, model lists and errors as JSON (stream
// chunks: server/chunk_writer.hpp). No sockets, so tests drive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/backend.hpp"

namespace conveyor::chat {
class chat_template;
}  // namespace conveyor::chat

namespace conveyor::server {

/// The endpoint an answer belongs to: it decides the objects' shapes.
enum class api_kind {
  /// `POST /v1/completions`: `text_completion` objects.
  completions,
  /// `POST /v1/chat/completions`: `chat.completion` and `chat.completion.chunk` objects.
  chat_completions,
};

// -- requests ------------------------------------------------------------------------------------

/// How a chat answer's text becomes tool calls (`tools` and `tool_choice`).
struct tool_call_reading {
  enum class mode : uint8_t {
    /// Plain text: no tools, or tool_choice "none".
    none,
    /// tool_choice names `function`: the output, constrained to its parameters' schema, is
    /// that function's arguments.
    named,
    /// tool_choice "required": the output, constrained, is a JSON array of {"name",
    /// "parameters"} calls.
    required,
    /// tool_choice "auto": the model decides; `parser` (model.tool_call_parser) reads its calls.
    parsed,
  };
  mode type = mode::none;
  /// named: the function.
  std::string function;
  /// parsed: the parser of the model's family ("hermes", "llama3_json").
  std::string parser;
};

/// A valid body of `POST /v1/completions`.
struct completion_body {
  /// One request per prompt, in the order of the choices they become (index 0, 1, ...).
  std::vector<completion_request> requests;
  /// `stream`: answer with server-sent events.
  bool stream = false;
  /// `stream_options.include_usage`: a last stream chunk carries the usage.
  bool include_usage = false;
  /// `model` as the client named it; absent (or null) leaves the choice to the server.
  std::optional<std::string> model;
  /// `n`: choices per prompt; `requests` holds the n of each prompt in turn.
  std::size_t n = 1;
  /// Chat: how each choice's text becomes tool calls.
  tool_call_reading tool_calls{};
};

/// Why a body was refused: a 400 with `param` naming the field.
struct body_error {
  /// What is wrong, for humans.
  std::string message;
  /// The offending field, e.g. "max_tokens"; empty when the body as a whole is wrong.
  std::string param;
};

/// Parses and validates a completion body: fields of the wrong type or out of range, a missing
/// or empty prompt, more than `max_prompts` prompts, `n` above `max_n`, or features Conveyor
/// lacks (best_of > 1, suffix) give a `body_error`. `logprobs` is an integer 0..20, `echo` a
/// boolean; `max_tokens` may be 0 with `echo`. Absent or null fields take their value from
/// `defaults`. Unknown fields are ignored. Each prompt gives `n` requests (choices), the n of
/// prompt 0 first; choice i of a prompt gets `seed` + i.
std::variant<completion_body, body_error> parse_completion_body(std::string_view body,
                                                                const completion_defaults& defaults,
                                                                std::size_t max_prompts,
                                                                std::size_t max_n = 16);

/// Parses and validates a chat completion body and renders its conversation with `tmpl` into
/// the one request's prompt, tokenized adding no special tokens (BOS only where the template
/// writes `bos_token`, as transformers' apply_chat_template(tokenize=True) and vLLM do).
/// `messages` must be a non-empty array of {role: system|user|assistant|tool, content: a string
/// or an array of {type: "text", text} parts, joined by newlines}; an assistant message may
/// carry `tool_calls` [{id, type: "function", function: {name, arguments: JSON text}}] and then
/// null or no content; a tool message carries `tool_call_id` (and may carry `name`).
/// `max_completion_tokens` takes precedence over `max_tokens`; `logprobs` is a boolean and
/// `top_logprobs` 0..20 (only with `logprobs` true); `tools`, `tool_choice` and
/// `parallel_tool_calls` as server/tool_fields.hpp reads them, tool_choice "auto" reading the
/// model's calls with the parser `tool_call_parser` (model.tool_call_parser; empty refuses
/// it); the other fields are those of `parse_completion_body` (`n` choices of the one prompt).
/// A template that refuses the conversation (raise_exception) gives a body_error on
/// "messages".
std::variant<completion_body, body_error> parse_chat_body(std::string_view body,
                                                          const completion_defaults& defaults,
                                                          const chat::chat_template& tmpl,
                                                          std::size_t max_n = 16,
                                                          std::string_view tool_call_parser = {});

/// The templates a chat body may be rendered with.
struct chat_templates {
  /// Conversations without tools (and all of them when `tools` is null); null refuses those
  /// with `refusal`.
  const chat::chat_template* plain = nullptr;
  /// Conversations with tools (tools given, tool_choice not "none"): the model's "tool_use"
  /// template, as apply_chat_template picks it; null: `plain` serves them.
  const chat::chat_template* tools = nullptr;
  /// Why a conversation without a template is refused.
  std::string_view refusal;
};

/// parse_chat_body with the template chosen per conversation as `templates` says; a
/// conversation that has none is a body_error with `templates.refusal` and no param.
std::variant<completion_body, body_error> parse_chat_body(std::string_view body,
                                                          const completion_defaults& defaults,
                                                          const chat_templates& templates,
                                                          std::size_t max_n = 16,
                                                          std::string_view tool_call_parser = {});

// -- responses -----------------------------------------------------------------------------------

/// What every object of one completion response shares.
struct completion_meta {
  /// "cmpl-" (or "chatcmpl-") and 24 random hex digits.
  std::string id;
  /// Unix time in seconds when the request arrived.
  int64_t created = 0;
  /// The model name.
  std::string model;
  /// Which objects to render.
  api_kind kind = api_kind::completions;
};

/// Log-probabilities of some of a choice's tokens, as `logprobs` renders them.
struct logprobs_part {
  /// The tokens, in order (with echo, the prompt's first).
  std::vector<token_logprob> tokens{};
  /// Where each token's text starts in the choice's whole text, in code points (as Python
  /// indexes a str); the completion's tokens start after the echoed prompt.
  std::vector<std::size_t> text_offsets{};
};

/// A call of a function in a chat answer.
struct tool_call_result {
  /// "call_" and 24 random hex digits.
  std::string id;
  /// The function.
  std::string name;
  /// Its arguments: JSON text, in Python's json.dumps form (", " and ": " separators).
  std::string arguments;
};

/// One finished choice of a completion.
struct choice_result {
  /// The whole generated text (a chat answer's content).
  std::string text;
  /// "stop", "length" or "tool_calls".
  std::string finish_reason;
  /// Its token counts.
  completion_usage usage;
  /// Its log-probabilities when the request asked for them.
  std::optional<logprobs_part> logprobs{};
  /// Chat: the calls of functions the answer made.
  std::vector<tool_call_result> tool_calls{};
  /// Chat: the content is null (an answer of calls alone).
  bool null_content = false;
};

/// Makes a fresh completion id: "cmpl-" ("chatcmpl-" for chat) and 24 random hex digits.
std::string make_completion_id(api_kind kind = api_kind::completions);

/// Makes a fresh tool call id: "call_" and 24 random hex digits.
std::string make_tool_call_id();

/// Renders the `logprobs` object of a choice or a stream chunk (server/chunk_writer.hpp):
/// completions' {tokens, token_logprobs, top_logprobs, text_offset}, chat's {content: [...]}.
std::string render_logprobs(api_kind kind, const logprobs_part& part);

/// Renders a whole `text_completion` object (a `chat.completion` with the text as the
/// assistant's message for chat, its `tool_calls` when it made any); choice i gets index i and
/// usage is the sum.
std::string render_completion(const completion_meta& meta,
                              const std::vector<choice_result>& choices);

/// Renders OpenAI's error object `{"error": {message, type, param, code}}`; an empty `param`
/// or `code` becomes null.
std::string render_error(std::string_view message, std::string_view type, std::string_view param,
                         std::string_view code);

/// Renders the `GET /v1/models` list with its one model.
std::string render_models(std::string_view model, int64_t created);

}  // namespace conveyor::server
