#include "bench/chat_workload.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <istream>
#include <limits>

#include <nlohmann/json.hpp>

#include "bench/random_text.hpp"

namespace conveyor::bench {

namespace {

std::string make_id(std::size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "c%04zu", i);
  return buf;
}

}  // namespace

double rate_of(const chat_workload& conversations) {
  if (conversations.size() < 2 || conversations.back().arrival_s <= 0)
    return std::numeric_limits<double>::infinity();
  return double(conversations.size() - 1) / conversations.back().arrival_s;
}

std::size_t turns_of(const chat_workload& conversations) {
  std::size_t n = 0;
  for (const auto& c : conversations) n += c.user_messages.size();
  return n;
}

error validate(const chat_workload_spec& spec) {
  auto bad = [](const std::string& what) { return make_error(ec::bad_request, what); };
  if (!(spec.rate > 0)) return bad("--rate must be positive (or inf)");
  if (spec.conversations == 0) return bad("--conversations must be at least 1");
  if (spec.turns == 0) return bad("--turns must be at least 1");
  if (spec.system_tokens < 0) return bad("--system-tokens must be at least 0");
  if (spec.min_user_words < 1 || spec.max_user_words < spec.min_user_words)
    return bad("--user-words A,B needs 1 <= A <= B");
  if (spec.max_tokens < 1) return bad("--reply-tokens must be at least 1");
  return {};
}

chat_workload generate_chat_workload(const chat_workload_spec& spec) {
  std::mt19937_64 rng{spec.seed};
  const std::string shared_system = spec.distinct_system ? "" : make_text(rng, spec.system_tokens);
  chat_workload out;
  out.reserve(spec.conversations);
  double t = 0;
  for (std::size_t i = 0; i < spec.conversations; ++i) {
    if (i > 0 && std::isfinite(spec.rate)) t += exponential_gap(rng, spec.rate);
    conversation c;
    c.id = make_id(i);
    c.arrival_s = t;
    c.system_prompt = spec.distinct_system ? make_text(rng, spec.system_tokens) : shared_system;
    for (std::size_t k = 0; k < spec.turns; ++k)
      c.user_messages.push_back(
          make_sentence(rng, uniform_int(rng, spec.min_user_words, spec.max_user_words)));
    c.max_tokens = spec.max_tokens;
    out.push_back(std::move(c));
  }
  return out;
}

expected<chat_workload> parse_chat_workload(std::istream& in, const std::string& source) {
  chat_workload out;
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
    conversation c;
    if (auto it = j.find("id"); it != j.end() && it->is_string())
      c.id = it->get<std::string>();
    else
      c.id = make_id(out.size());
    auto arrival = j.find("arrival_s");
    if (arrival == j.end() || !arrival->is_number()) return bad("arrival_s: expected a number");
    c.arrival_s = arrival->get<double>();
    if (!(c.arrival_s >= 0)) return bad("arrival_s: must be >= 0");
    if (auto system = j.find("system_prompt"); system != j.end()) {
      if (!system->is_string()) return bad("system_prompt: expected a string");
      c.system_prompt = system->get<std::string>();
    }
    auto users = j.find("user_messages");
    if (users == j.end() || !users->is_array() || users->empty())
      return bad("user_messages: expected a non-empty array of strings");
    for (const auto& u : *users) {
      if (!u.is_string()) return bad("user_messages: expected a non-empty array of strings");
      c.user_messages.push_back(u.get<std::string>());
    }
    auto max_tokens = j.find("max_tokens");
    if (max_tokens == j.end() || !max_tokens->is_number_integer() ||
        max_tokens->get<int64_t>() < 1 ||
        max_tokens->get<int64_t>() > std::numeric_limits<int32_t>::max())
      return bad("max_tokens: expected an integer >= 1");
    c.max_tokens = int32_t(max_tokens->get<int64_t>());
    if (!out.empty() && c.arrival_s < out.back().arrival_s)
      return bad("arrival_s: lines must be in arrival order");
    out.push_back(std::move(c));
  }
  if (out.empty()) return make_error(ec::bad_file, source + ": no conversations");
  return out;
}

expected<chat_workload> load_chat_workload(const std::string& path) {
  std::ifstream in{path};
  if (!in) return make_error(ec::bad_file, path + ": cannot open");
  return parse_chat_workload(in, path);
}

std::string to_jsonl(const chat_workload& conversations) {
  std::string out;
  for (const auto& c : conversations) {
    nlohmann::ordered_json j = {{"id", c.id},
                                {"arrival_s", c.arrival_s},
                                {"system_prompt", c.system_prompt},
                                {"user_messages", c.user_messages},
                                {"max_tokens", c.max_tokens}};
    out += j.dump();
    out += '\n';
  }
  return out;
}

error save_chat_workload(const chat_workload& conversations, const std::string& path) {
  std::ofstream out{path};
  if (!out) return make_error(ec::bad_file, path + ": cannot write");
  out << to_jsonl(conversations);
  if (!out) return make_error(ec::bad_file, path + ": write failed");
  return {};
}

}  // namespace conveyor::bench
