#include "server/openai.hpp"

#include <cmath>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "server/field_policy.hpp"
#include "server/request_fields.hpp"

namespace conveyor::server {

namespace {

using namespace detail;

// One prompt: text, or token ids used as given.
struct prompt_input {
  std::string text;
  std::vector<int32_t> tokens;
};

// Token ids of a prompt at `param` ("prompt" or "prompt[1]"); each id within the vocabulary.
std::vector<int32_t> get_token_prompt(const json& ids, const std::string& param,
                                      int32_t vocab_size) {
  if (ids.empty()) fail(param, detail::quoted(param) + " must not be an empty array of token ids");
  std::vector<int32_t> tokens;
  tokens.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto where = param + "[" + std::to_string(i) + "]";
    if (!ids[i].is_number())
      fail(where, detail::quoted(where) +
                      " must be a token id (an integer) like the other elements, got " +
                      type_name_of(ids[i]));
    tokens.push_back(get_token_id(ids[i], vocab_size, where));
  }
  return tokens;
}

// `prompt`: a string, an array of strings, an array of token ids, or an array of such arrays.
std::vector<prompt_input> get_prompts(const json& obj, std::size_t max_prompts,
                                      int32_t vocab_size) {
  auto* j = find(obj, "prompt");
  if (!j) fail("prompt", "'prompt' is required");
  if (j->is_string()) return {prompt_input{j->get<std::string>(), {}}};
  static const std::string shapes =
      "a string, an array of strings, an array of token ids or an array of arrays of token ids";
  if (!j->is_array()) fail("prompt", "'prompt' must be " + shapes + ", got " + type_name_of(*j));
  if (j->empty()) fail("prompt", "'prompt' must not be an empty array");
  if (j->front().is_number()) return {prompt_input{{}, get_token_prompt(*j, "prompt", vocab_size)}};
  if (j->size() > max_prompts)
    fail("prompt", "'prompt' has " + std::to_string(j->size()) + " prompts, at most " +
                       std::to_string(max_prompts) + " are allowed");
  std::vector<prompt_input> result;
  result.reserve(j->size());
  const bool token_lists = j->front().is_array();
  for (std::size_t i = 0; i < j->size(); ++i) {
    const auto& x = (*j)[i];
    const auto where = "prompt[" + std::to_string(i) + "]";
    if (token_lists && x.is_array()) {
      result.push_back(prompt_input{{}, get_token_prompt(x, where, vocab_size)});
    } else if (!token_lists && x.is_string()) {
      result.push_back(prompt_input{x.get<std::string>(), {}});
    } else {
      fail(where,
           "'prompt' must be " + shapes + "; " + detail::quoted(where) + " is " + type_name_of(x) +
               (token_lists ? " in an array of token-id arrays" : " in an array of strings"));
    }
  }
  return result;
}

// Fields of OpenAI's API that Conveyor does not implement: refused when they ask for more than
// the plain behaviour, so that a client never silently gets less than it asked for.
void refuse_unsupported(const json& obj) {
  if (auto n = get_integer(obj, "n", 1, std::numeric_limits<int32_t>::max()); n && *n != 1)
    fail("n", "'n' > 1 is not supported; send the prompt several times in an array instead");
  if (auto b = get_integer(obj, "best_of", 1, std::numeric_limits<int32_t>::max()); b && *b != 1)
    fail("best_of", "'best_of' > 1 is not supported");
  if (auto e = get_bool(obj, "echo"); e && *e) fail("echo", "'echo' is not supported");
  if (auto l = get_integer(obj, "logprobs", 0, 5); l && *l != 0)
    fail("logprobs", "'logprobs' is not supported");
  if (auto* s = find(obj, "suffix"); s && !(s->is_string() && s->empty()))
    fail("suffix", "'suffix' is not supported");
}

completion_body parse_object(const json& obj, const completion_defaults& defaults,
                             std::size_t max_prompts) {
  if (auto* model = find(obj, "model"); model && !model->is_string())
    fail("model", std::string{"'model' must be a string, got "} + type_name_of(*model));
  auto prompts = get_prompts(obj, max_prompts, defaults.vocab_size);
  refuse_unsupported(obj);
  refuse_unapplied(obj, api_kind::completions);
  log_unknown_fields(obj, api_kind::completions);
  // vLLM's add_special_tokens: whether a text prompt gets BOS (token prompts are used as given).
  const bool add_bos = get_bool(obj, "add_special_tokens").value_or(true);

  auto proto = parse_sampling(obj, defaults);
  completion_body result;
  parse_stream(obj, result);
  if (auto* model = find(obj, "model")) result.model = model->get<std::string>();
  result.requests.reserve(prompts.size());
  for (auto& prompt : prompts) {
    result.requests.push_back(proto);
    result.requests.back().prompt = std::move(prompt.text);
    result.requests.back().add_bos = add_bos;
    result.requests.back().prompt_tokens = std::move(prompt.tokens);
  }
  return result;
}

bool is_chat(const completion_meta& meta) {
  return meta.kind == api_kind::chat_completions;
}

json meta_object(const completion_meta& meta, bool chunk = false) {
  const char* object = !is_chat(meta) ? "text_completion"
                       : chunk       ? "chat.completion.chunk"
                                     : "chat.completion";
  return json{{"id", meta.id},
              {"object", object},
              {"created", meta.created},
              {"model", meta.model}};
}

json usage_object(completion_usage usage) {
  return json{{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

}  // namespace

std::variant<completion_body, body_error> parse_completion_body(std::string_view body,
                                                                const completion_defaults& defaults,
                                                                std::size_t max_prompts) {
  json obj;
  if (auto err = parse_json_object(body, obj)) return *err;
  try {
    return parse_object(obj, defaults, max_prompts);
  } catch (const field_error& e) {
    return body_error{e.message, e.param};
  }
}

std::string make_completion_id(api_kind kind) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char digits[] = "0123456789abcdef";
  std::string id = kind == api_kind::chat_completions ? "chatcmpl-" : "cmpl-";
  for (int i = 0; i < 24; ++i) id += digits[rng() & 0xf];
  return id;
}

std::string render_completion(const completion_meta& meta,
                              const std::vector<choice_result>& choices) {
  json obj = meta_object(meta);
  json list = json::array();
  completion_usage total;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const auto& c = choices[i];
    if (is_chat(meta))
      list.push_back(json{{"index", i},
                          {"message", {{"role", "assistant"}, {"content", c.text}}},
                          {"logprobs", nullptr},
                          {"finish_reason", c.finish_reason}});
    else
      list.push_back(json{{"text", c.text},
                          {"index", i},
                          {"logprobs", nullptr},
                          {"finish_reason", c.finish_reason}});
    total.prompt_tokens += c.usage.prompt_tokens;
    total.completion_tokens += c.usage.completion_tokens;
  }
  obj["choices"] = std::move(list);
  obj["usage"] = usage_object(total);
  return dump(obj);
}

std::string render_chunk(const completion_meta& meta, std::size_t index, std::string_view text,
                         std::optional<std::string_view> finish_reason) {
  json obj = meta_object(meta, true);
  json choice;
  if (is_chat(meta))
    choice = json{{"index", index},
                  {"delta", text.empty() && finish_reason ? json::object()
                                                          : json{{"content", text}}},
                  {"logprobs", nullptr},
                  {"finish_reason", nullptr}};
  else
    choice = json{{"text", text}, {"index", index}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (finish_reason) choice["finish_reason"] = *finish_reason;
  obj["choices"] = json::array({std::move(choice)});
  return dump(obj);
}

std::string render_role_chunk(const completion_meta& meta, std::size_t index) {
  json obj = meta_object(meta, true);
  obj["choices"] = json::array({json{{"index", index},
                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}});
  return dump(obj);
}

std::string render_usage_chunk(const completion_meta& meta, completion_usage usage) {
  json obj = meta_object(meta, true);
  obj["choices"] = json::array();
  obj["usage"] = usage_object(usage);
  return dump(obj);
}

std::string render_error(std::string_view message, std::string_view type, std::string_view param,
                         std::string_view code) {
  json error{{"message", message},
             {"type", type},
             {"param", param.empty() ? json(nullptr) : json(param)},
             {"code", code.empty() ? json(nullptr) : json(code)}};
  return dump(json{{"error", std::move(error)}});
}

std::string render_models(std::string_view model, int64_t created) {
  json entry{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "conveyor"}};
  return dump(json{{"object", "list"}, {"data", json::array({std::move(entry)})}});
}

}  // namespace conveyor::server
