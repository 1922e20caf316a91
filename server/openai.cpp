#include "server/openai.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "server/chunk_writer.hpp"
#include "server/field_policy.hpp"
#include "server/format_fields.hpp"
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
  if (auto b = get_integer(obj, "best_of", 1, std::numeric_limits<int32_t>::max()); b && *b != 1)
    fail("best_of", "'best_of' > 1 is not supported");
  if (auto* s = find(obj, "suffix"); s && !(s->is_string() && s->empty()))
    fail("suffix", "'suffix' is not supported");
}

completion_body parse_object(const json& obj, const completion_defaults& defaults,
                             std::size_t max_prompts, std::size_t max_n) {
  if (auto* model = find(obj, "model"); model && !model->is_string())
    fail("model", std::string{"'model' must be a string, got "} + type_name_of(*model));
  auto prompts = get_prompts(obj, max_prompts, defaults.vocab_size);
  refuse_unsupported(obj);
  refuse_unapplied(obj, api_kind::completions);
  log_unknown_fields(obj, api_kind::completions);
  // vLLM's add_special_tokens: whether a text prompt gets BOS (token prompts are used as given).
  const bool add_bos = get_bool(obj, "add_special_tokens").value_or(true);
  const std::size_t n = get_n(obj, max_n);

  // Log-probabilities and echo. With echo, max_tokens 0 asks for the prompt alone
  // (evaluation harnesses score prompts so); the shared parser allows it nowhere else.
  const bool echo = get_bool(obj, "echo").value_or(false);
  auto logprobs = get_integer(obj, "logprobs", 0, 20);
  json without_max_tokens;
  const json* fields = &obj;
  if (auto* m = find(obj, "max_tokens"); echo && m && m->is_number() && m->get<double>() == 0) {
    without_max_tokens = obj;
    without_max_tokens.erase("max_tokens");
    fields = &without_max_tokens;
  }
  auto proto = parse_sampling(*fields, defaults);
  if (fields == &without_max_tokens) {
    proto.params.max_tokens = 0;
    // min_tokens was checked against the default limit: the prompt alone generates nothing.
    if (auto problem = min_tokens_problem(proto.params.min_tokens, 0); !problem.empty())
      fail("min_tokens", "'min_tokens' " + problem);
  }
  proto.params.echo = echo;
  proto.params.logprobs = logprobs ? int32_t(*logprobs) : -1;
  proto.params.prompt_logprobs = echo && logprobs;
  completion_body result;
  parse_stream(obj, result);
  if (auto* model = find(obj, "model")) result.model = model->get<std::string>();
  // Choices in OpenAI's order: the n choices of prompt 0, then those of prompt 1, ...
  result.n = n;
  result.requests.reserve(prompts.size() * n);
  for (auto& prompt : prompts) {
    proto.prompt = std::move(prompt.text);
    proto.add_bos = add_bos;
    proto.prompt_tokens = std::move(prompt.tokens);
    add_choices(proto, n, result);
  }
  return result;
}

bool is_chat(const completion_meta& meta) {
  return meta.kind == api_kind::chat_completions;
}

json meta_object(const completion_meta& meta) {
  const char* object = is_chat(meta) ? "chat.completion" : "text_completion";
  return json{{"id", meta.id},
              {"object", object},
              {"created", meta.created},
              {"model", meta.model}};
}

// A log-probability as OpenAI writes it: -infinity (a token top_k or top_p excludes) as
// -9999.0, as vLLM does; NaN (a prompt's first token) as null.
json logprob_value(float logprob) {
  if (std::isnan(logprob)) return nullptr;
  return std::max(double(logprob), -9999.0);
}

json utf8_bytes(const std::string& text) {
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(int(c));
  return bytes;
}

// completions: {tokens, token_logprobs, top_logprobs, text_offset}; each top_logprobs entry maps
// the alternatives' texts and the chosen token's to their log-probabilities (null where the
// token has none).
json completion_logprobs(const logprobs_part& part) {
  json tokens = json::array(), values = json::array(), tops = json::array(),
       offsets = json::array();
  for (std::size_t i = 0; i < part.tokens.size(); ++i) {
    const auto& t = part.tokens[i];
    tokens.push_back(t.token);
    values.push_back(logprob_value(t.logprob));
    if (std::isnan(t.logprob)) {
      tops.push_back(nullptr);
    } else {
      json top = json::object();
      // The most likely first: a text shared by several tokens keeps the likeliest's value.
      for (const auto& alt : t.top)
        if (!top.contains(alt.token)) top[alt.token] = logprob_value(alt.logprob);
      if (!top.contains(t.token)) top[t.token] = logprob_value(t.logprob);
      tops.push_back(std::move(top));
    }
    offsets.push_back(i < part.text_offsets.size() ? part.text_offsets[i] : 0);
  }
  return json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(values)},
              {"top_logprobs", std::move(tops)},
              {"text_offset", std::move(offsets)}};
}

// chat: {content: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
json chat_logprobs(const logprobs_part& part) {
  json content = json::array();
  for (const auto& t : part.tokens) {
    json top = json::array();
    for (const auto& alt : t.top)
      top.push_back(json{{"token", alt.token},
                         {"logprob", logprob_value(alt.logprob)},
                         {"bytes", utf8_bytes(alt.token)}});
    content.push_back(json{{"token", t.token},
                           {"logprob", logprob_value(t.logprob)},
                           {"bytes", utf8_bytes(t.token)},
                           {"top_logprobs", std::move(top)}});
  }
  return json{{"content", std::move(content)}};
}

json logprobs_object(const completion_meta& meta, const logprobs_part* part) {
  if (!part) return nullptr;
  return meta.kind == api_kind::chat_completions ? chat_logprobs(*part)
                                                 : completion_logprobs(*part);
}

json usage_object(completion_usage usage) {
  return json{{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

}  // namespace

std::variant<completion_body, body_error> parse_completion_body(std::string_view body,
                                                                const completion_defaults& defaults,
                                                                std::size_t max_prompts,
                                                                std::size_t max_n) {
  json obj;
  if (auto err = parse_json_object(body, obj)) return *err;
  try {
    auto result = parse_object(obj, defaults, max_prompts, max_n);
    keep_schema_order(body, result.requests);
    return result;
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

std::string make_tool_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char digits[] = "0123456789abcdef";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += digits[rng() & 0xf];
  return id;
}

std::string render_logprobs(api_kind kind, const logprobs_part& part) {
  return dump(kind == api_kind::chat_completions ? chat_logprobs(part) : completion_logprobs(part));
}

std::string render_completion(const completion_meta& meta,
                              const std::vector<choice_result>& choices) {
  json obj = meta_object(meta);
  json list = json::array();
  completion_usage total;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const auto& c = choices[i];
    const json logprobs = logprobs_object(meta, c.logprobs ? &*c.logprobs : nullptr);
    if (is_chat(meta)) {
      json message{{"role", "assistant"},
                   {"content", c.null_content ? json(nullptr) : json(c.text)}};
      if (!c.tool_calls.empty()) {
        json calls = json::array();
        for (const auto& call : c.tool_calls)
          calls.push_back(json{{"id", call.id},
                               {"type", "function"},
                               {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        message["tool_calls"] = std::move(calls);
      }
      list.push_back(json{{"index", i},
                          {"message", std::move(message)},
                          {"logprobs", logprobs},
                          {"finish_reason", c.finish_reason}});
    } else {
      list.push_back(json{{"text", c.text},
                          {"index", i},
                          {"logprobs", logprobs},
                          {"finish_reason", c.finish_reason}});
    }
    total.prompt_tokens += c.usage.prompt_tokens;
    total.completion_tokens += c.usage.completion_tokens;
    total.cached_tokens += c.usage.cached_tokens;
  }
  obj["choices"] = std::move(list);
  obj["usage"] = usage_object(total);
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
