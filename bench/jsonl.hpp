// Workload files in JSON Lines, whatever a line holds beside what every workload line has: an
// id, an arrival time and a max_tokens (bench/workload.hpp, bench/chat_workload.hpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <istream>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace conveyor::bench {

/// The id of item `i` of a workload whose lines name none: `prefix` and four digits ("r0007").
inline std::string numbered_id(char prefix, std::size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%c%04zu", prefix, i);
  return buf;
}

/// Items of type T (with `id`, `arrival_s` and `max_tokens` members) from JSON Lines: blank lines
/// are skipped; every other line is an object with a number `arrival_s` >= 0 (in order), an
/// integer `max_tokens` >= 1 and an optional string `id` (else `numbered_id(id_prefix, index)`);
/// `read(line, item)` reads the rest and returns what is wrong, if anything. Errors name
/// `source`, the line and the key; no items at all is one (`no <what>`).
template <class T, class Read>
expected<std::vector<T>> parse_jsonl(std::istream& in, const std::string& source, char id_prefix,
                                     const char* what, Read read) {
  std::vector<T> out;
  std::string line;
  std::size_t number = 0;
  auto bad = [&](const std::string& problem) {
    return make_error(ec::bad_file, source + ":" + std::to_string(number) + ": " + problem);
  };
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    T item;
    if (auto it = j.find("id"); it != j.end() && it->is_string())
      item.id = it->get<std::string>();
    else
      item.id = numbered_id(id_prefix, out.size());
    auto arrival = j.find("arrival_s");
    if (arrival == j.end() || !arrival->is_number()) return bad("arrival_s: expected a number");
    item.arrival_s = arrival->get<double>();
    if (!(item.arrival_s >= 0)) return bad("arrival_s: must be >= 0");
    if (std::optional<std::string> problem = read(j, item)) return bad(*problem);
    auto max_tokens = j.find("max_tokens");
    if (max_tokens == j.end() || !max_tokens->is_number_integer() ||
        max_tokens->get<int64_t>() < 1 ||
        max_tokens->get<int64_t>() > std::numeric_limits<int32_t>::max())
      return bad("max_tokens: expected an integer >= 1");
    item.max_tokens = int32_t(max_tokens->get<int64_t>());
    if (!out.empty() && item.arrival_s < out.back().arrival_s)
      return bad("arrival_s: lines must be in arrival order");
    out.push_back(std::move(item));
  }
  if (out.empty()) return make_error(ec::bad_file, source + ": no " + what);
  return out;
}

/// `parse(stream, path)` over the file at `path`, or an error naming it when it cannot be opened.
template <class Parse>
auto load_jsonl(const std::string& path, Parse parse)
    -> decltype(parse(std::declval<std::istream&>(), path)) {
  std::ifstream in{path};
  if (!in) return make_error(ec::bad_file, path + ": cannot open");
  return parse(in, path);
}

/// Writes `text` to `path`, or says why not.
inline error save_text(const std::string& path, const std::string& text) {
  std::ofstream out{path};
  if (!out) return make_error(ec::bad_file, path + ": cannot write");
  out << text;
  if (!out) return make_error(ec::bad_file, path + ": write failed");
  return {};
}

}  // namespace conveyor::bench
