// `POST /v1/chat/completions` bodies: the conversation validated and rendered through the
// model's chat template into one completion request.
#include <limits>
#include <optional>

#include "chat/chat_template.hpp"
#include "chat/json_value.hpp"
#include "common/error.hpp"
#include "server/field_policy.hpp"
#include "server/format_fields.hpp"
#include "server/openai.hpp"
#include "server/request_fields.hpp"
#include "server/tool_fields.hpp"

namespace conveyor::server {

namespace {

using namespace detail;

// A message's content: a string, or an array of {type: "text", text} parts joined by newlines;
// none when it may be null or absent (an assistant message that calls functions).
std::optional<std::string> get_content(const json& message, const std::string& where,
                                       bool may_be_null = false) {
  auto param = where + ".content";
  auto* content = find(message, "content");
  if (!content && may_be_null) return std::nullopt;
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

std::string get_string(const json& obj, const char* key, const std::string& param) {
  auto* j = find(obj, key);
  if (!j || !j->is_string()) fail(param, detail::quoted(param) + " must be a string");
  return j->get<std::string>();
}

// An assistant message's `tool_calls`: [{id, type: "function", function: {name, arguments}}],
// the arguments a JSON string that the template sees parsed (as vLLM hands them over).
std::vector<chat::chat_tool_call> get_tool_calls(const json& calls, const std::string& where) {
  const auto param = where + ".tool_calls";
  if (!calls.is_array())
    fail(param, detail::quoted(param) + " must be an array, got " + type_name_of(calls));
  std::vector<chat::chat_tool_call> result;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const auto& c = calls[i];
    const auto at = param + "[" + std::to_string(i) + "]";
    if (!c.is_object()) fail(at, detail::quoted(at) + " must be an object, got " + type_name_of(c));
    if (auto* type = find(c, "type"); type && *type != "function")
      fail(at + ".type",
           detail::quoted(at + ".type") + " must be \"function\", got " + dump(*type));
    auto* function = find(c, "function");
    if (!function || !function->is_object())
      fail(at + ".function",
           detail::quoted(at + ".function") + " must be an object with 'name' and 'arguments'");
    chat::chat_tool_call call;
    if (find(c, "id")) call.id = get_string(c, "id", at + ".id");
    call.name = get_string(*function, "name", at + ".function.name");
    const auto arguments = get_string(*function, "arguments", at + ".function.arguments");
    auto parsed = chat::value_from_json_text(arguments);
    if (!parsed)
      fail(at + ".function.arguments", detail::quoted(at + ".function.arguments") +
                                           " must be JSON text (" + message_of(parsed.error()) +
                                           ")");
    call.arguments = std::move(*parsed);
    result.push_back(std::move(call));
  }
  return result;
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
    if (r != "system" && r != "user" && r != "assistant" && r != "tool")
      fail(where + ".role", detail::quoted(where + ".role") +
                                " must be \"system\", \"user\", \"assistant\" or \"tool\", got " +
                                role->dump());
    chat::chat_message message{r, std::nullopt};
    if (r == "assistant")
      if (auto* calls = find(m, "tool_calls")) message.tool_calls = get_tool_calls(*calls, where);
    message.content = get_content(m, where, !message.tool_calls.empty());
    if (r == "tool") {
      message.tool_call_id = get_string(m, "tool_call_id", where + ".tool_call_id");
      if (find(m, "name")) message.name = get_string(m, "name", where + ".name");
    }
    result.push_back(std::move(message));
  }
  return result;
}

// Chat fields Conveyor does not implement, refused when they ask for more than plain text.
void refuse_unsupported_chat(const json& obj) {
  if (auto* t = find(obj, "functions"); t && !(t->is_array() && t->empty()))
    fail("functions", "'functions' is not supported (it is deprecated): give 'tools'");
}

completion_body parse_chat_object(const json& obj, const nlohmann::ordered_json& ordered,
                                  const completion_defaults& defaults,
                                  const chat_templates& templates, std::size_t max_n,
                                  std::string_view tool_call_parser) {
  if (auto* model = find(obj, "model"); model && !model->is_string())
    fail("model", std::string{"'model' must be a string, got "} + type_name_of(*model));
  auto messages = get_messages(obj);
  refuse_unsupported_chat(obj);
  auto tools = parse_tool_fields(obj, ordered, tool_call_parser);
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
  // Forcing tool calls constrains the output: another output format cannot apply as well.
  if (tools.constraint.active()) {
    if (proto.params.constraint.active())
      fail("tool_choice", "'tool_choice' " + dump(*find(obj, "tool_choice")) + " and " +
                              detail::quoted(proto.params.constraint.field) +
                              " both ask for an output format; give one");
    proto.params.constraint = std::move(tools.constraint);
  }
  // vLLM's add_generation_prompt: false leaves the assistant's turn unopened.
  chat::render_options options;
  options.add_generation_prompt = get_bool(obj, "add_generation_prompt").value_or(true);
  options.tools = std::move(tools.template_tools);
  // As apply_chat_template picks a model's named templates: "tool_use" for a conversation
  // with tools, where the model has one.
  const chat::chat_template* tmpl =
      options.tools.is_none() || !templates.tools ? templates.plain : templates.tools;
  if (!tmpl) fail("", std::string{templates.refusal});
  auto prompt = tmpl->render(messages, options);
  if (!prompt) fail("messages", message_of(prompt.error()));
  // Tokenized adding no special tokens, as transformers' apply_chat_template(tokenize=True) and
  // vLLM's chat do: the template writes BOS (bos_token) when the model wants one.
  proto.prompt = std::move(*prompt);
  proto.add_bos = false;
  result.n = n;
  result.tool_calls = std::move(tools.reading);
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
                                                          std::size_t max_n,
                                                          std::string_view tool_call_parser) {
  return parse_chat_body(body, defaults, chat_templates{&tmpl, nullptr, {}}, max_n,
                         tool_call_parser);
}

std::variant<completion_body, body_error> parse_chat_body(std::string_view body,
                                                          const completion_defaults& defaults,
                                                          const chat_templates& templates,
                                                          std::size_t max_n,
                                                          std::string_view tool_call_parser) {
  json obj;
  if (auto err = parse_json_object(body, obj)) return *err;
  try {
    // The tools in the client's key order, as the template shows them and their schemas are
    // written (the parsed body sorts keys).
    nlohmann::ordered_json ordered;
    if (auto* tools = find(obj, "tools"); tools && tools->is_array() && !tools->empty())
      ordered = nlohmann::ordered_json::parse(body, nullptr, false);
    auto result = parse_chat_object(obj, ordered, defaults, templates, max_n, tool_call_parser);
    keep_schema_order(body, result.requests);
    return result;
  } catch (const field_error& e) {
    return body_error{e.message, e.param};
  }
}

}  // namespace conveyor::server
