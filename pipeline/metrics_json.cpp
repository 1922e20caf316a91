// The metrics as JSON.
#include "pipeline/metrics_json.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

namespace conveyor::pipeline {

namespace {

nlohmann::json json_number(double x) {
  if (std::isnan(x) || std::isinf(x)) return nullptr;
  return x;
}

nlohmann::json json_histogram(const histogram& h) {
  return {{"count", h.count()},
          {"sum", json_number(h.sum())},
          {"mean", json_number(h.mean())},
          {"p50", json_number(h.percentile(50))},
          {"p90", json_number(h.percentile(90))},
          {"p99", json_number(h.percentile(99))}};
}

}  // namespace

std::string json_snapshot(const metrics_registry& m) {
  nlohmann::json requests_json = nlohmann::json::object();
  for (auto x : all_outcomes) requests_json[to_string(x)] = m.requests(x);
  requests_json["total"] = m.requests_total();
  nlohmann::json reasons_json = nlohmann::json::object();
  for (auto x : all_finish_reasons) reasons_json[to_string(x)] = m.finished(x);
  nlohmann::json step_json = nlohmann::json::object();
  for (auto x : all_step_kinds) step_json[to_string(x)] = json_histogram(m.step_time(x));
  nlohmann::json running_json = nlohmann::json::object();
  nlohmann::json busy_json = nlohmann::json::object();
  nlohmann::json executors_json = nlohmann::json::object();
  nlohmann::json kv_blocks_json = nlohmann::json::object();
  for (const auto& name : m.executors()) {
    running_json[name] = m.running_sequences(name);
    if (auto kv = m.kv_blocks(name))
      kv_blocks_json[name] = {{"used", kv->used}, {"cached", kv->cached}, {"free", kv->free}};
    busy_json[name] = m.busy_ratio(name);
    auto device = m.executor_device(name);
    executors_json[name] = {
        {"device", device.empty() ? nlohmann::json(nullptr) : nlohmann::json(device)},
        {"steps", m.executor_steps(name)}};
  }
  nlohmann::json result = {
      {"requests", requests_json},
      {"finish_reasons", reasons_json},
      {"tokens",
       {{"prompt", m.prompt_tokens_total()},
        {"generation", m.generation_tokens_total()},
        {"per_second", m.tokens_per_second()}}},
      {"prefix_cache",
       {{"queries", m.prefix_cache_queries_total()},
        {"hits", m.prefix_cache_hits_total()},
        {"hit_rate", json_number(m.prefix_cache_hit_rate())}}},
      {"histograms",
       {{"queue_time_seconds", json_histogram(m.queue_time())},
        {"time_to_first_token_seconds", json_histogram(m.time_to_first_token())},
        {"inter_token_latency_seconds", json_histogram(m.inter_token_latency())},
        {"time_per_output_token_seconds", json_histogram(m.time_per_output_token())},
        {"e2e_latency_seconds", json_histogram(m.e2e_latency())},
        {"request_prompt_tokens", json_histogram(m.request_prompt_tokens())},
        {"request_output_tokens", json_histogram(m.request_output_tokens())},
        {"batch_size", json_histogram(m.batch_size())},
        {"padding_fraction", json_histogram(m.padding_fraction())},
        {"step_time_seconds", step_json}}},
      {"gauges",
       {{"queue_depth", m.queue_depth()},
        {"running_sequences", running_json},
        {"executor_busy_ratio", busy_json},
        {"kv_blocks", kv_blocks_json}}},
      {"executors", executors_json},
  };
  return result.dump();
}

}  // namespace conveyor::pipeline
