// The sampling fields a bench run sets on every request (--temperature, --top-p, --top-k,
// --ignore-eos): their checks, and how they go into a request in process or over HTTP.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace conveyor::bench {

/// What every request of a run asks for; a field left unset is left to the other side (the
/// configuration's `[generation]` in process, the server's own default over HTTP).
struct sampling_fields {
  /// Softmax temperature in [0, 2]; 0 is greedy.
  std::optional<double> temperature;
  /// Nucleus sampling mass in (0, 1].
  std::optional<double> top_p;
  /// Keep the k most likely tokens; 0 keeps all.
  std::optional<int64_t> top_k;
  /// Generate exactly max_tokens, whatever end tokens the model produces; false sends nothing.
  bool ignore_eos = false;
};

/// What --temperature sends when it is not given: 1.0, OpenAI's default and the one the bench
/// has always sent, so that a peer whose own default is different samples the same way.
inline constexpr double default_target_temperature = 1.0;

/// The first field outside the limits of a request (conveyor::sampling_limits, those the HTTP
/// server applies), named by its flag: "--top-p: must be greater than 0 and at most 1, got 0";
/// nullopt when all are allowed.
std::optional<std::string> check(const sampling_fields& fields);

/// Adds the fields to the JSON body of a /v1/completions request: `temperature` always (the
/// given one or `default_target_temperature`), `top_p` and `top_k` when set, and
/// `"ignore_eos": true` when set.
void add_to_body(const sampling_fields& fields, nlohmann::json& body);

/// The fields as JSON for a report's settings: the set ones only.
nlohmann::json to_json(const sampling_fields& fields);

}  // namespace conveyor::bench
