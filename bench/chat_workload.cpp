#include "bench/chat_workload.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <istream>
#include <limits>

#include <nlohmann/json.hpp>

#include "bench/jsonl.hpp"
#include "bench/random_text.hpp"

namespace conveyor::bench {

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
    c.id = numbered_id('c', i);
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
  return parse_jsonl<conversation>(
      in, source, 'c', "conversations",
      [](const nlohmann::json& j, conversation& c) -> std::optional<std::string> {
        if (auto system = j.find("system_prompt"); system != j.end()) {
          if (!system->is_string()) return "system_prompt: expected a string";
          c.system_prompt = system->get<std::string>();
        }
        auto users = j.find("user_messages");
        const std::string messages = "user_messages: expected a non-empty array of strings";
        if (users == j.end() || !users->is_array() || users->empty()) return messages;
        for (const auto& u : *users) {
          if (!u.is_string()) return messages;
          c.user_messages.push_back(u.get<std::string>());
        }
        return std::nullopt;
      });
}

expected<chat_workload> load_chat_workload(const std::string& path) {
  return load_jsonl(path, parse_chat_workload);
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
  return save_text(path, to_jsonl(conversations));
}

}  // namespace conveyor::bench
