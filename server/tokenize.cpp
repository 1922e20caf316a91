// `POST /tokenize` and `POST /detokenize`.
#include "server/tokenize.hpp"

#include "chat/chat_template.hpp"
#include "common/error.hpp"
#include "server/request_fields.hpp"

namespace conveyor::server::detail {

namespace {

error_answer bad_request(std::string message, std::string param) {
  error_answer a;
  a.message = std::move(message);
  a.param = std::move(param);
  a.code = to_string(ec::bad_request);
  return a;
}

error_answer not_implemented(std::string message) {
  error_answer a;
  a.status = 501;
  a.type = "not_implemented_error";
  a.message = std::move(message);
  a.code = "not_implemented";
  return a;
}

error_answer internal_error(const std::string& what) {
  error_answer a;
  a.status = 500;
  a.type = "server_error";
  a.message = "the tokenizer failed: " + what;
  a.code = to_string(ec::internal);
  return a;
}

}  // namespace

std::variant<std::string, error_answer> answer_tokenize(std::string_view body,
                                                        const completion_backend& backend,
                                                        const chat::chat_template* tmpl,
                                                        std::string_view chat_refusal) {
  if (!backend.has_tokenizer()) return not_implemented("this server has no tokenizer to use");
  json obj;
  if (auto err = parse_json_object(body, obj)) return bad_request(err->message, err->param);
  try {
    if (auto* model = find(obj, "model"); model && !model->is_string())
      fail("model", std::string{"'model' must be a string, got "} + type_name_of(*model));
    std::vector<int32_t> tokens;
    const bool has_prompt = find(obj, "prompt") != nullptr;
    const bool has_messages = find(obj, "messages") != nullptr;
    if (has_prompt == has_messages)
      fail(has_prompt ? "messages" : "prompt",
           "exactly one of 'prompt' (a string) and 'messages' (a chat) is required");
    if (has_prompt) {
      const auto& prompt = *find(obj, "prompt");
      if (!prompt.is_string())
        fail("prompt", std::string{"'prompt' must be a string, got "} + type_name_of(prompt));
      const bool special = get_bool(obj, "add_special_tokens").value_or(true);
      auto encoded = backend.tokenize(prompt.get<std::string>(), special);
      if (!encoded) fail("prompt", message_of(encoded.error()));
      tokens = std::move(*encoded);
    } else {
      if (!tmpl) return chat_refused(chat_refusal);
      auto messages = read_messages(obj);
      const bool generation_prompt = get_bool(obj, "add_generation_prompt").value_or(true);
      auto prompt = tmpl->render(messages, generation_prompt);
      if (!prompt) fail("messages", message_of(prompt.error()));
      // As a chat completion's prompt (vLLM's default too): the template writes BOS if any.
      const bool special = get_bool(obj, "add_special_tokens").value_or(false);
      auto encoded = backend.tokenize(*prompt, special);
      if (!encoded) fail("messages", message_of(encoded.error()));
      tokens = std::move(*encoded);
    }
    return dump(json{
        {"count", tokens.size()}, {"max_model_len", backend.max_model_len()}, {"tokens", tokens}});
  } catch (const field_error& e) {
    return bad_request(e.message, e.param);
  } catch (const std::exception& e) {
    return internal_error(e.what());
  }
}

std::variant<std::string, error_answer> answer_detokenize(std::string_view body,
                                                          const completion_backend& backend) {
  if (!backend.has_tokenizer()) return not_implemented("this server has no tokenizer to use");
  json obj;
  if (auto err = parse_json_object(body, obj)) return bad_request(err->message, err->param);
  try {
    if (auto* model = find(obj, "model"); model && !model->is_string())
      fail("model", std::string{"'model' must be a string, got "} + type_name_of(*model));
    auto* ids = find(obj, "tokens");
    if (!ids) fail("tokens", "'tokens' is required");
    if (!ids->is_array())
      fail("tokens",
           std::string{"'tokens' must be an array of token ids, got "} + type_name_of(*ids));
    const int32_t vocab = backend.defaults().vocab_size;
    std::vector<int32_t> tokens;
    tokens.reserve(ids->size());
    for (std::size_t i = 0; i < ids->size(); ++i)
      tokens.push_back(get_token_id((*ids)[i], vocab, "tokens[" + std::to_string(i) + "]"));
    return dump(json{{"prompt", backend.detokenize(tokens)}});
  } catch (const field_error& e) {
    return bad_request(e.message, e.param);
  } catch (const std::exception& e) {
    return internal_error(e.what());
  }
}

}  // namespace conveyor::server::detail
