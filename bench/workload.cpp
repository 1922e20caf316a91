#include "bench/workload.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <istream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/jsonl.hpp"
#include "bench/random_text.hpp"

namespace conveyor::bench {

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
    r.id = numbered_id('r', i);
    r.arrival_s = t;
    r.prompt = make_sentence(rng, uniform_int(rng, spec.min_words, spec.max_words));
    r.max_tokens = int32_t(log_uniform_int(rng, spec.min_tokens, spec.max_tokens));
    out.push_back(std::move(r));
  }
  return out;
}

expected<workload> parse_workload(std::istream& in, const std::string& source) {
  return parse_jsonl<workload_request>(
      in, source, 'r', "requests",
      [](const nlohmann::json& j, workload_request& r) -> std::optional<std::string> {
        auto prompt = j.find("prompt");
        if (prompt == j.end() || !prompt->is_string()) return "prompt: expected a string";
        r.prompt = prompt->get<std::string>();
        return std::nullopt;
      });
}

expected<workload> load_workload(const std::string& path) {
  return load_jsonl(path, parse_workload);
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
  return save_text(path, to_jsonl(requests));
}

}  // namespace conveyor::bench
