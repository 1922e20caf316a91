#include "bench/sampling_fields.hpp"

#include <nlohmann/json.hpp>

#include "common/sampling.hpp"

namespace conveyor::bench {

std::optional<std::string> check(const sampling_fields& fields) {
  auto named = [](const char* flag, const std::string& problem) -> std::optional<std::string> {
    if (problem.empty()) return std::nullopt;
    return std::string{flag} + ": " + problem;
  };
  if (fields.temperature)
    if (auto p = named("--temperature", temperature_problem(*fields.temperature))) return p;
  if (fields.top_p)
    if (auto p = named("--top-p", top_p_problem(*fields.top_p))) return p;
  if (fields.top_k)
    if (auto p = named("--top-k", top_k_problem(*fields.top_k))) return p;
  return std::nullopt;
}

void add_to_body(const sampling_fields& fields, nlohmann::json& body) {
  body["temperature"] = fields.temperature.value_or(default_target_temperature);
  if (fields.top_p) body["top_p"] = *fields.top_p;
  if (fields.top_k) body["top_k"] = *fields.top_k;
  if (fields.ignore_eos) body["ignore_eos"] = true;
}

nlohmann::json to_json(const sampling_fields& fields) {
  auto out = nlohmann::json::object();
  if (fields.temperature) out["temperature"] = *fields.temperature;
  if (fields.top_p) out["top_p"] = *fields.top_p;
  if (fields.top_k) out["top_k"] = *fields.top_k;
  if (fields.ignore_eos) out["ignore_eos"] = true;
  return out;
}

}  // namespace conveyor::bench
