#include "bench/workload.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <istream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/random_text.hpp"

namespace conveyor::bench {

namespace {

std::string make_id(std::size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "r%04zu", i);
  return buf;
}

}  // namespace

double rate_of(const workload& requests) {
  if (requests.size() < 2 || requests.back().arrival_s <= 0)
    return std::numeric_limits<double>::infinity();
  return double(requests.size() - 1) / requests.back().arrival_s;
}

error validate(const workload_spec& spec) {
  auto bad = [](const std::string& what) { return make_error(ec::bad_request, what); };
  if (!(spec.rate > 0)) return bad("--rate must be positive (or inf)");
  if (spec.requests == 0) return bad("--requests must be at least 1");
  if (spec.min_words < 1 || spec.max_words < spec.min_words)
    return bad("--prompt-words A,B needs 1 <= A <= B");
  if (spec.min_tokens < 1 || spec.max_tokens < spec.min_tokens)
    return bad("--max-tokens A,B needs 1 <= A <= B");
  return {};
}

workload generate_workload(const workload_spec& spec) {
  std::mt19937_64 rng{spec.seed};
  workload out;
  out.reserve(spec.requests);
  double t = 0;
  for (std::size_t i = 0; i < spec.requests; ++i) {
    if (i > 0 && std::isfinite(spec.rate)) t += exponential_gap(rng, spec.rate);
    workload_request r;
    r.id = make_id(i);
    r.arrival_s = t;
    r.prompt = make_sentence(rng, uniform_int(rng, spec.min_words, spec.max_words));
    r.max_tokens = int32_t(log_uniform_int(rng, spec.min_tokens, spec.max_tokens));
    out.push_back(std::move(r));
  }
  return out;
}

expected<workload> parse_workload(std::istream& in, const std::string& source) {
  workload out;
  std::string line;
  std::size_t number = 0;
  auto bad = [&](const std::string& what) {
    return make_error(ec::bad_file, source + ":" + std::to_string(number) + ": " + what);
  };
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    workload_request r;
    if (auto it = j.find("id"); it != j.end() && it->is_string())
      r.id = it->get<std::string>();
    else
      r.id = make_id(out.size());
    auto arrival = j.find("arrival_s");
    if (arrival == j.end() || !arrival->is_number()) return bad("arrival_s: expected a number");
    r.arrival_s = arrival->get<double>();
    if (!(r.arrival_s >= 0)) return bad("arrival_s: must be >= 0");
    auto prompt = j.find("prompt");
    if (prompt == j.end() || !prompt->is_string()) return bad("prompt: expected a string");
    r.prompt = prompt->get<std::string>();
    auto max_tokens = j.find("max_tokens");
    if (max_tokens == j.end() || !max_tokens->is_number_integer() || max_tokens->get<int64_t>() < 1)
      return bad("max_tokens: expected an integer >= 1");
    r.max_tokens = int32_t(max_tokens->get<int64_t>());
    if (!out.empty() && r.arrival_s < out.back().arrival_s)
      return bad("arrival_s: lines must be in arrival order");
    out.push_back(std::move(r));
  }
  if (out.empty()) return make_error(ec::bad_file, source + ": no requests");
  return out;
}

expected<workload> load_workload(const std::string& path) {
  std::ifstream in{path};
  if (!in) return make_error(ec::bad_file, path + ": cannot open");
  return parse_workload(in, path);
}

std::string to_jsonl(const workload& requests) {
  std::string out;
  for (const auto& r : requests) {
    nlohmann::ordered_json j = {{"id", r.id},
                                {"arrival_s", r.arrival_s},
                                {"prompt", r.prompt},
                                {"max_tokens", r.max_tokens}};
    out += j.dump();
    out += '\n';
  }
  return out;
}

error save_workload(const workload& requests, const std::string& path) {
  std::ofstream out{path};
  if (!out) return make_error(ec::bad_file, path + ": cannot write");
  out << to_jsonl(requests);
  if (!out) return make_error(ec::bad_file, path + ": write failed");
  return {};
}

}  // namespace conveyor::bench
