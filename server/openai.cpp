#include "server/openai.hpp"

#include <cmath>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

namespace conveyor::server {

namespace {

using json = nlohmann::json;

// Dumps without throwing on invalid UTF-8 (the backend promises valid text; be safe anyway).
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

const char* type_name_of(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    case json::value_t::number_float:
      return "number";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    default:
      return "value";
  }
}

// Validation failure inside this file; turned into a body_error at the boundary.
struct field_error {
  std::string message;
  std::string param;
};

[[noreturn]] void fail(std::string param, std::string message) {
  throw field_error{std::move(message), std::move(param)};
}

std::string quoted(std::string_view name) {
  return "'" + std::string{name} + "'";
}

// Returns the field, or nullptr when it is absent or null.
const json* find(const json& obj, const char* name) {
  auto i = obj.find(name);
  if (i == obj.end() || i->is_null()) return nullptr;
  return &*i;
}

// An integer in [lo, hi]; a number with an integral value (10.0) counts as an integer.
std::optional<int64_t> get_integer(const json& obj, const char* name, int64_t lo, int64_t hi) {
  auto* j = find(obj, name);
  if (!j) return std::nullopt;
  int64_t value = 0;
  if (j->is_number_unsigned()) {
    auto u = j->get<uint64_t>();
    if (hi < 0 || u > static_cast<uint64_t>(hi))
      fail(name, quoted(name) + " must be at most " + std::to_string(hi) + ", got " + j->dump());
    value = static_cast<int64_t>(u);
  } else if (j->is_number_integer()) {
    value = j->get<int64_t>();
  } else if (j->is_number_float()) {
    double d = j->get<double>();
    if (!std::isfinite(d) || std::floor(d) != d || d < -9.2e18 || d > 9.2e18)
      fail(name, quoted(name) + " must be an integer, got " + j->dump());
    value = static_cast<int64_t>(d);
  } else {
    fail(name, quoted(name) + " must be an integer, got " + type_name_of(*j));
  }
  if (value < lo)
    fail(name, quoted(name) + " must be at least " + std::to_string(lo) + ", got " + j->dump());
  if (value > hi)
    fail(name, quoted(name) + " must be at most " + std::to_string(hi) + ", got " + j->dump());
  return value;
}

std::optional<double> get_number(const json& obj, const char* name) {
  auto* j = find(obj, name);
  if (!j) return std::nullopt;
  if (!j->is_number()) fail(name, quoted(name) + " must be a number, got " + type_name_of(*j));
  return j->get<double>();
}

std::optional<bool> get_bool(const json& obj, const char* name) {
  auto* j = find(obj, name);
  if (!j) return std::nullopt;
  if (!j->is_boolean()) fail(name, quoted(name) + " must be a boolean, got " + type_name_of(*j));
  return j->get<bool>();
}

std::vector<std::string> get_prompts(const json& obj, std::size_t max_prompts) {
  auto* j = find(obj, "prompt");
  if (!j) fail("prompt", "'prompt' is required");
  if (j->is_string()) return {j->get<std::string>()};
  if (!j->is_array())
    fail("prompt",
         std::string{"'prompt' must be a string or an array of strings, got "} + type_name_of(*j));
  if (j->empty()) fail("prompt", "'prompt' must not be an empty array");
  if (j->size() > max_prompts)
    fail("prompt", "'prompt' has " + std::to_string(j->size()) + " strings, at most " +
                       std::to_string(max_prompts) + " are allowed");
  std::vector<std::string> result;
  result.reserve(j->size());
  for (const auto& x : *j) {
    if (!x.is_string())
      fail("prompt", std::string{"'prompt' must be a string or an array of strings, found "} +
                         type_name_of(x) + " in the array (token-id prompts are not supported)");
    result.push_back(x.get<std::string>());
  }
  return result;
}

// Up to 16 stop strings; empty strings are dropped (they would stop at once).
std::vector<std::string> get_stop(const json& obj) {
  auto* j = find(obj, "stop");
  if (!j) return {};
  std::vector<std::string> result;
  if (j->is_string()) {
    if (!j->get_ref<const std::string&>().empty()) result.push_back(j->get<std::string>());
    return result;
  }
  if (!j->is_array())
    fail("stop",
         std::string{"'stop' must be a string or an array of strings, got "} + type_name_of(*j));
  constexpr std::size_t max_stop = 16;
  if (j->size() > max_stop)
    fail("stop", "'stop' has " + std::to_string(j->size()) + " strings, at most " +
                     std::to_string(max_stop) + " are allowed");
  for (const auto& x : *j) {
    if (!x.is_string())
      fail("stop", std::string{"'stop' must be a string or an array of strings, found "} +
                       type_name_of(x) + " in the array");
    if (!x.get_ref<const std::string&>().empty()) result.push_back(x.get<std::string>());
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
  auto prompts = get_prompts(obj, max_prompts);
  refuse_unsupported(obj);

  completion_request proto;
  proto.max_tokens =
      static_cast<int32_t>(get_integer(obj, "max_tokens", 1, std::numeric_limits<int32_t>::max())
                               .value_or(defaults.max_tokens));
  auto temperature = get_number(obj, "temperature").value_or(defaults.temperature);
  if (!(temperature >= 0.0 && temperature <= 2.0))
    fail("temperature", "'temperature' must be between 0 and 2, got " + json(temperature).dump());
  proto.temperature = static_cast<float>(temperature);
  auto top_p = get_number(obj, "top_p").value_or(defaults.top_p);
  if (!(top_p > 0.0 && top_p <= 1.0))
    fail("top_p", "'top_p' must be greater than 0 and at most 1, got " + json(top_p).dump());
  proto.top_p = static_cast<float>(top_p);
  proto.top_k = static_cast<int32_t>(
      get_integer(obj, "top_k", 0, std::numeric_limits<int32_t>::max()).value_or(defaults.top_k));
  if (auto* seed = find(obj, "seed")) {
    // Any 64-bit integer; negative seeds keep their two's-complement bits.
    if (seed->is_number_unsigned())
      proto.seed = seed->get<uint64_t>();
    else
      proto.seed = static_cast<uint64_t>(*get_integer(
          obj, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  }
  proto.stop = get_stop(obj);
  proto.priority =
      static_cast<int32_t>(get_integer(obj, "priority", std::numeric_limits<int32_t>::min(),
                                       std::numeric_limits<int32_t>::max())
                               .value_or(0));
  if (auto timeout = get_number(obj, "timeout")) {
    if (!(*timeout > 0.0) || !std::isfinite(*timeout))
      fail("timeout",
           "'timeout' must be a positive number of seconds, got " + json(*timeout).dump());
    proto.timeout_s = *timeout;
  }

  completion_body result;
  result.stream = get_bool(obj, "stream").value_or(false);
  if (auto* options = find(obj, "stream_options")) {
    if (!options->is_object())
      fail("stream_options",
           std::string{"'stream_options' must be an object, got "} + type_name_of(*options));
    if (!result.stream)
      fail("stream_options", "'stream_options' is only allowed when 'stream' is true");
    try {
      result.include_usage = get_bool(*options, "include_usage").value_or(false);
    } catch (field_error& e) {
      e.param = "stream_options.include_usage";
      throw;
    }
  }
  result.requests.reserve(prompts.size());
  for (auto& prompt : prompts) {
    result.requests.push_back(proto);
    result.requests.back().prompt = std::move(prompt);
  }
  return result;
}

json meta_object(const completion_meta& meta) {
  return json{{"id", meta.id},
              {"object", "text_completion"},
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
  try {
    obj = json::parse(body.begin(), body.end());
  } catch (const json::parse_error& e) {
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix.
    std::string what = e.what();
    if (auto end = what.find("] "); what.rfind("[json.exception", 0) == 0 && end != what.npos)
      what.erase(0, end + 2);
    return body_error{"the body is not valid JSON: " + what, ""};
  }
  if (!obj.is_object())
    return body_error{std::string{"the body must be a JSON object, got "} + type_name_of(obj), ""};
  try {
    return parse_object(obj, defaults, max_prompts);
  } catch (const field_error& e) {
    return body_error{e.message, e.param};
  }
}

std::string make_completion_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char digits[] = "0123456789abcdef";
  std::string id = "cmpl-";
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
    list.push_back(json{
        {"text", c.text}, {"index", i}, {"logprobs", nullptr}, {"finish_reason", c.finish_reason}});
    total.prompt_tokens += c.usage.prompt_tokens;
    total.completion_tokens += c.usage.completion_tokens;
  }
  obj["choices"] = std::move(list);
  obj["usage"] = usage_object(total);
  return dump(obj);
}

std::string render_chunk(const completion_meta& meta, std::size_t index, std::string_view text,
                         std::optional<std::string_view> finish_reason) {
  json obj = meta_object(meta);
  json choice{{"text", text}, {"index", index}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (finish_reason) choice["finish_reason"] = *finish_reason;
  obj["choices"] = json::array({std::move(choice)});
  return dump(obj);
}

std::string render_usage_chunk(const completion_meta& meta, completion_usage usage) {
  json obj = meta_object(meta);
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
