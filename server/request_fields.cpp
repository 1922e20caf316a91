#include "server/request_fields.hpp"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "common/deadline.hpp"
#include "common/sampling.hpp"
#include "server/format_fields.hpp"

namespace conveyor::server::detail {

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

completion_request parse_sampling(const json& obj, const completion_defaults& defaults,
                                  const char* max_tokens_field) {
  // Only the client's fields are checked here, against conveyor::sampling_limits; the defaults
  // were checked against the same limits when the configuration loaded.
  using limits = sampling_limits;
  completion_request proto;
  proto.params.max_tokens = static_cast<int32_t>(
      get_integer(obj, max_tokens_field, limits::min_max_tokens, limits::max_max_tokens)
          .value_or(defaults.max_tokens));
  proto.params.temperature = defaults.temperature;
  if (auto temperature = get_number(obj, "temperature")) {
    if (auto problem = temperature_problem(*temperature); !problem.empty())
      fail("temperature", "'temperature' " + problem);
    proto.params.temperature = static_cast<float>(*temperature);
  }
  proto.params.top_p = defaults.top_p;
  if (auto top_p = get_number(obj, "top_p")) {
    if (auto problem = top_p_problem(*top_p); !problem.empty()) fail("top_p", "'top_p' " + problem);
    proto.params.top_p = static_cast<float>(*top_p);
  }
  proto.params.top_k = static_cast<int32_t>(
      get_integer(obj, "top_k", limits::min_top_k, limits::max_top_k).value_or(defaults.top_k));
  if (auto* seed = find(obj, "seed")) {
    // Any 64-bit integer; negative seeds keep their two's-complement bits.
    if (seed->is_number_unsigned())
      proto.params.seed = seed->get<uint64_t>();
    else
      proto.params.seed = static_cast<uint64_t>(*get_integer(
          obj, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  }
  proto.params.stop = get_stop(obj);
  proto.priority =
      static_cast<int32_t>(get_integer(obj, "priority", std::numeric_limits<int32_t>::min(),
                                       std::numeric_limits<int32_t>::max())
                               .value_or(0));
  if (auto timeout = get_number(obj, "timeout")) {
    if (!(*timeout > 0.0) || !std::isfinite(*timeout))
      fail("timeout",
           "'timeout' must be a positive number of seconds, got " + json(*timeout).dump());
    // Seconds beyond this would overflow the nanosecond deadline and expire at once.
    if (*timeout > max_timeout_s)
      fail("timeout", "'timeout' must be at most " + std::to_string(int64_t(max_timeout_s)) +
                          " seconds (a year), got " + json(*timeout).dump());
    proto.timeout_s = *timeout;
  }
  parse_logit_fields(obj, defaults, proto);
  proto.params.constraint = parse_output_format(obj);
  return proto;
}

std::size_t get_n(const json& obj, std::size_t max_n) {
  auto* j = find(obj, "n");
  if (!j) return 1;
  auto n = get_integer(obj, "n", 1, std::numeric_limits<int32_t>::max());
  if (static_cast<std::size_t>(*n) > max_n)
    fail("n", "'n' must be at most " + std::to_string(max_n) + " (server.max_n), got " + j->dump());
  return static_cast<std::size_t>(*n);
}

void add_choices(const completion_request& proto, std::size_t n, completion_body& body) {
  for (std::size_t i = 0; i < n; ++i) {
    body.requests.push_back(proto);
    // Wraps around like the 64-bit seed it is.
    if (proto.params.seed) body.requests.back().params.seed = *proto.params.seed + i;
  }
}

std::string token_id_problem(const json& j, int32_t vocab_size) {
  const int64_t hi = vocab_size > 0 ? int64_t(vocab_size) - 1 : std::numeric_limits<int32_t>::max();
  int64_t id = 0;
  if (j.is_number_unsigned()) {
    auto u = j.get<uint64_t>();
    if (u > uint64_t(hi))
      return "is outside the vocabulary (0.." + std::to_string(hi) + "), got " + j.dump();
    return {};
  }
  if (j.is_number_integer()) {
    id = j.get<int64_t>();
  } else if (j.is_number_float()) {
    double d = j.get<double>();
    if (!std::isfinite(d) || std::floor(d) != d)
      return "must be an integer token id, got " + j.dump();
    if (d < 0 || d > double(hi))
      return "is outside the vocabulary (0.." + std::to_string(hi) + "), got " + j.dump();
    return {};
  } else {
    return std::string{"must be an integer token id, got "} + type_name_of(j);
  }
  if (id < 0 || id > hi)
    return "is outside the vocabulary (0.." + std::to_string(hi) + "), got " + j.dump();
  return {};
}

int32_t get_token_id(const json& j, int32_t vocab_size, const std::string& param) {
  if (auto problem = token_id_problem(j, vocab_size); !problem.empty())
    fail(param, detail::quoted(param) + " " + problem);
  return static_cast<int32_t>(j.get<double>());
}

void parse_logit_fields(const json& obj, const completion_defaults& defaults,
                        completion_request& proto) {
  using limits = sampling_limits;
  for (auto [name, field] : {std::pair{"presence_penalty", &proto.params.presence_penalty},
                             std::pair{"frequency_penalty", &proto.params.frequency_penalty}})
    if (auto v = get_number(obj, name)) {
      if (auto problem = penalty_problem(*v); !problem.empty())
        fail(name, quoted(name) + " " + problem);
      *field = static_cast<float>(*v);
    }
  if (auto v = get_number(obj, "repetition_penalty")) {
    if (auto problem = repetition_penalty_problem(*v); !problem.empty())
      fail("repetition_penalty", "'repetition_penalty' " + problem);
    proto.params.repetition_penalty = static_cast<float>(*v);
  }
  if (auto* bias = find(obj, "logit_bias")) {
    if (!bias->is_object())
      fail("logit_bias",
           std::string{"'logit_bias' must be an object of token ids to biases, got "} +
               type_name_of(*bias));
    if (bias->size() > limits::max_logit_bias_entries)
      fail("logit_bias", "'logit_bias' has " + std::to_string(bias->size()) + " entries, at most " +
                             std::to_string(limits::max_logit_bias_entries) + " are allowed");
    std::unordered_map<int64_t, std::string> keys_of_ids;
    for (const auto& [key, value] : bias->items()) {
      const std::string param = "logit_bias." + key;
      // The keys are token ids written as strings, as OpenAI's clients send them: digits only.
      const bool digits = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
      // More than ten digits is beyond any vocabulary (and beyond int64 past 18).
      const int64_t id = !digits           ? -1
                         : key.size() > 10 ? std::numeric_limits<int64_t>::max()
                                           : std::stoll(key);
      const int64_t hi = defaults.vocab_size > 0 ? int64_t(defaults.vocab_size) - 1
                                                 : std::numeric_limits<int32_t>::max();
      if (!digits)
        fail(param, "'logit_bias' keys must be token ids (decimal digits), got \"" + key + "\"");
      if (id > hi)
        fail(param, "'logit_bias' token id " + key + " is outside the vocabulary (0.." +
                        std::to_string(hi) + ")");
      if (!value.is_number())
        fail(param, detail::quoted(param) + " must be a number, got " + type_name_of(value));
      const double b = value.get<double>();
      if (auto problem = logit_bias_problem(b); !problem.empty())
        fail(param, detail::quoted(param) + " " + problem);
      // "7" and "07" are one token: its bias is given once, never added up.
      if (auto [earlier, fresh] = keys_of_ids.emplace(id, key); !fresh)
        fail(param, "'logit_bias' keys \"" + earlier->second + "\" and \"" + key +
                        "\" are the same token id " + std::to_string(id) +
                        ": give each token once");
      proto.params.logit_bias.push_back(
          sampling::token_bias{static_cast<int32_t>(id), static_cast<float>(b)});
    }
  }
  if (auto* ids = find(obj, "stop_token_ids")) {
    if (!ids->is_array())
      fail("stop_token_ids", std::string{"'stop_token_ids' must be an array of token ids, got "} +
                                 type_name_of(*ids));
    if (ids->size() > limits::max_stop_token_ids)
      fail("stop_token_ids", "'stop_token_ids' has " + std::to_string(ids->size()) +
                                 " ids, at most " + std::to_string(limits::max_stop_token_ids) +
                                 " are allowed");
    for (std::size_t i = 0; i < ids->size(); ++i)
      proto.params.stop_token_ids.push_back(get_token_id(
          (*ids)[i], defaults.vocab_size, "stop_token_ids[" + std::to_string(i) + "]"));
  }
  if (auto min = get_integer(obj, "min_tokens", 0, std::numeric_limits<int32_t>::max())) {
    if (auto problem = min_tokens_problem(*min, proto.params.max_tokens); !problem.empty())
      fail("min_tokens", "'min_tokens' " + problem);
    proto.params.min_tokens = static_cast<int32_t>(*min);
  }
  proto.params.ignore_eos = get_bool(obj, "ignore_eos").value_or(false);
}

void parse_stream(const json& obj, completion_body& result) {
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
}

std::optional<body_error> parse_json_object(std::string_view body, json& obj) {
  try {
    obj = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    // A syntax error (parse_error) or a number too large for a double (out_of_range.406).
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix.
    std::string what = e.what();
    if (auto end = what.find("] "); what.rfind("[json.exception", 0) == 0 && end != what.npos)
      what.erase(0, end + 2);
    return body_error{"the body is not valid JSON: " + what, ""};
  }
  if (!obj.is_object())
    return body_error{std::string{"the body must be a JSON object, got "} + type_name_of(obj), ""};
  return std::nullopt;
}

}  // namespace conveyor::server::detail
