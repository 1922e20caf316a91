// `POST /v1/chat/completions` bodies: the conversation validated and rendered through the
// model's chat template into one completion request.
#include <limits>

#include "chat/chat_template.hpp"
#include "common/error.hpp"
#include "server/field_policy.hpp"
#include "server/format_fields.hpp"
#include "server/openai.hpp"
#include "server/request_fields.hpp"

namespace conveyor::server {

namespace {

using namespace detail;

// A message's content: a string, or an array of {type: "text", text} parts joined by newlines.
std::string get_content(const json& message, const std::string& where) {
  auto param = where + ".content";
  auto* content = find(message, "content");
  if (!content) fail(param, detail::quoted(param) + " is required");
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array())
    fail(param, detail::quoted(param) + " must be a string or an array of text parts, got " +
                    type_name_of(*content));
  std::string text;
  for (std::size_t i = 0; i < content->size(); ++i) {
    const auto& part = (*content)[i];
    auto part_param = param + "[" + std::to_string(i) + "]";
    if (!part.is_object())
      fail(part_param, detail::quoted(part_param) + " must be an object, got " + type_name_of(part));
    auto* type = find(part, "type");
    if (!type || !type->is_string() || type->get_ref<const std::string&>() != "text")
      fail(part_param + ".type", detail::quoted(part_param + ".type") + " must be \"text\"" +
                                     (type ? ", got " + type->dump() : std::string{}) +
                                     " (only text parts are supported)");
    auto* part_text = find(part, "text");
    if (!part_text || !part_text->is_string())
      fail(part_param + ".text", detail::quoted(part_param + ".text") + " must be a string");
    if (i) text += '\n';
    text += part_text->get<std::string>();
  }
  return text;
}

std::vector<chat::chat_message> get_messages(const json& obj) {
  auto* messages = find(obj, "messages");
  if (!messages) fail("messages", "'messages' is required");
  if (!messages->is_array())
    fail("messages", std::string{"'messages' must be an array, got "} + type_name_of(*messages));
  if (messages->empty()) fail("messages", "'messages' must not be empty");
  std::vector<chat::chat_message> result;
  result.reserve(messages->size());
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const auto& m = (*messages)[i];
    auto where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object())
      fail(where, detail::quoted(where) + " must be an object, got " + type_name_of(m));
    auto* role = find(m, "role");
    if (!role || !role->is_string())
      fail(where + ".role", detail::quoted(where + ".role") + " must be a string");
    const auto& r = role->get_ref<const std::string&>();
    if (r != "system" && r != "user" && r != "assistant")
      fail(where + ".role", detail::quoted(where + ".role") +
                                " must be \"system\", \"user\" or \"assistant\", got " +
                                role->dump());
    result.push_back({r, get_content(m, where)});
  }
  return result;
}

// Chat fields Conveyor does not implement, refused when they ask for more than plain text.
void refuse_unsupported_chat(const json& obj) {
  for (const char* name : {"tools", "functions"})
    if (auto* t = find(obj, name); t && !(t->is_array() && t->empty()))
      fail(name, detail::quoted(name) + " is not supported (no tool calls)");
}

completion_body parse_chat_object(const json& obj, const completion_defaults& defaults,
                                  const chat::chat_template& tmpl, std::size_t max_n) {
  if (auto* model = find(obj, "model"); model && !model->is_string())
    fail("model", std::string{"'model' must be a string, got "} + type_name_of(*model));
  auto messages = get_messages(obj);
  refuse_unsupported_chat(obj);
  refuse_unapplied(obj, api_kind::chat_completions);
  log_unknown_fields(obj, api_kind::chat_completions);
  const std::size_t n = get_n(obj, max_n);
  // Both limits are checked; the newer max_completion_tokens wins when both are given.
  get_integer(obj, "max_tokens", 1, std::numeric_limits<int32_t>::max());
  auto proto = parse_sampling(
      obj, defaults, find(obj, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens");
  // Log-probabilities: `logprobs` true, with `top_logprobs` alternatives (0..20).
  const bool logprobs = get_bool(obj, "logprobs").value_or(false);
  auto top = get_integer(obj, "top_logprobs", 0, 20);
  if (top && !logprobs)
    fail("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  proto.params.logprobs = logprobs ? int32_t(top.value_or(0)) : -1;
  completion_body result;
  parse_stream(obj, result);
  if (auto* model = find(obj, "model")) result.model = model->get<std::string>();
  // vLLM's add_generation_prompt: false leaves the assistant's turn unopened.
  auto prompt = tmpl.render(messages, get_bool(obj, "add_generation_prompt").value_or(true));
  if (!prompt) fail("messages", message_of(prompt.error()));
  // Tokenized adding no special tokens, as transformers' apply_chat_template(tokenize=True) and
  // vLLM's chat do: the template writes BOS (bos_token) when the model wants one.
  proto.prompt = std::move(*prompt);
  proto.add_bos = false;
  result.n = n;
  add_choices(proto, n, result);
  return result;
}

}  // namespace

std::vector<chat::chat_message> detail::read_messages(const json& obj) {
  return get_messages(obj);
}

std::variant<completion_body, body_error> parse_chat_body(std::string_view body,
                                                          const completion_defaults& defaults,
                                                          const chat::chat_template& tmpl,
                                                          std::size_t max_n) {
  json obj;
  if (auto err = parse_json_object(body, obj)) return *err;
  try {
    auto result = parse_chat_object(obj, defaults, tmpl, max_n);
    keep_schema_order(body, result.requests);
    return result;
  } catch (const field_error& e) {
    return body_error{e.message, e.param};
  }
}

}  // namespace conveyor::server
