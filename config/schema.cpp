// Value rules, the checks between values, and the helpers that name and suggest keys.
#include "config/schema.hpp"

#include "common/host_port.hpp"
#include "common/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace conveyor::config::detail {

namespace {

/// Whether `s` is one or more decimal digits.
bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// Replaces "executors[N]" at the start of `key` by "executors[]"; returns "[N]" in `index`.
std::string canonical(std::string_view key, std::string& index) {
  std::string prefix{executors_key};
  prefix += '[';
  if (key.substr(0, prefix.size()) != prefix) return std::string{key};
  auto close = key.find(']');
  if (close == std::string_view::npos) return std::string{key};
  index = std::string{key.substr(prefix.size() - 1, close - prefix.size() + 2)};
  return prefix + "]" + std::string{key.substr(close + 1)};
}

/// Undoes `canonical` for a suggested key.
std::string restore(const std::string& key, const std::string& index) {
  std::string prefix{executors_key};
  prefix += "[]";
  if (index.empty() || key.compare(0, prefix.size(), prefix) != 0) return key;
  return std::string{executors_key} + index + key.substr(prefix.size());
}

/// Splits "a.b.c" into "a.b" and "c"; the parent of "c" is "".
std::pair<std::string, std::string> split_last(const std::string& key) {
  auto dot = key.rfind('.');
  if (dot == std::string::npos) return {"", key};
  return {key.substr(0, dot), key.substr(dot + 1)};
}

/// Collects every section name and every dotted key.
struct key_lister {
  std::vector<std::string> top;
  std::vector<std::string> all;
  std::string prefix;

  template <class T>
  void operator()(std::string_view key, const T&, const rule&) {
    all.push_back(prefix + "." + std::string{key});
  }

  template <class S>
  void section(std::string_view name, const S& x) {
    top.emplace_back(name);
    prefix = std::string{name};
    fields(*this, x);
  }

  void executor_list(bool, const std::vector<executor>&) {
    top.emplace_back(executors_key);
    all.emplace_back(executors_key);
    prefix = std::string{executors_key} + "[]";
    const executor one;
    fields(*this, one);
  }
};

key_lister list_keys() {
  key_lister lister;
  const pipeline defaults;
  sections(lister, defaults);
  return lister;
}

/// Checks each value of a pipeline against its rule.
struct value_checker {
  std::vector<issue>& out;
  std::string prefix;

  template <class T>
  void operator()(std::string_view key, const T& value, const rule& r) {
    check_value(prefix + "." + std::string{key}, value, r, out);
  }

  template <class S>
  void section(std::string_view name, const S& x) {
    prefix = std::string{name};
    fields(*this, x);
  }

  void executor_list(bool, const std::vector<executor>& xs) {
    for (size_t i = 0; i < xs.size(); ++i) {
      prefix = executor_key(i);
      fields(*this, xs[i]);
    }
  }
};

}  // namespace

// -- rules
// -----------------------------------------------------------------------------------------

std::string check_model_path(std::string_view value) {
  constexpr std::string_view synthetic = "synthetic:";
  if (value.substr(0, synthetic.size()) != synthetic) return {};
  if (value == "synthetic:s15m" || value == "synthetic:s42m" || value == "synthetic:s1b") return {};
  return "unknown synthetic model '" + std::string{value} +
         "', use 'synthetic:s15m', 'synthetic:s42m' or 'synthetic:s1b'";
}

std::string check_dtype(std::string_view value) {
  if (value == "auto" || value == "f32" || value == "bf16") return {};
  return "must be 'auto', 'f32' or 'bf16', got '" + std::string{value} + "'";
}

std::string check_model_dtype(std::string_view value) {
  if (value == "auto" || value == "f32" || value == "bf16" || value == "q8_0" || value == "q4_0")
    return {};
  return "must be 'auto', 'f32', 'bf16', 'q8_0' or 'q4_0', got '" + std::string{value} + "'";
}

std::string check_tool_call_parser(std::string_view value) {
  if (value.empty() || value == "hermes" || value == "llama3_json") return {};
  return "must be '', 'hermes' or 'llama3_json', got '" + std::string{value} + "'";
}

std::string check_device(std::string_view value) {
  if (value == "cpu" || value == "cuda") return {};
  constexpr std::string_view cuda = "cuda:";
  if (value.substr(0, cuda.size()) == cuda && value.size() <= cuda.size() + 4 &&
      all_digits(value.substr(cuda.size())))
    return {};
  return "must be 'cpu', 'cuda' or 'cuda:N', got '" + std::string{value} + "'";
}

std::string check_endpoint(std::string_view value) {
  if (parse_host_port(value)) return {};
  return "must be 'host:port' with a port from 1 to 65535, got '" + std::string{value} + "'";
}

// -- problems
// --------------------------------------------------------------------------------------

void check_value(const std::string& key, const std::string& value, const rule& r,
                 std::vector<issue>& out) {
  if (value.empty() && r.not_empty) {
    out.push_back({key, "must not be empty"});
    return;
  }
  if (!r.choices.empty() &&
      std::find(r.choices.begin(), r.choices.end(), value) == r.choices.end()) {
    std::string msg = "must be one of ";
    for (size_t i = 0; i < r.choices.size(); ++i) {
      if (i > 0) msg += ", ";
      msg += "'" + std::string{r.choices[i]} + "'";
    }
    out.push_back({key, msg + ", got '" + value + "'"});
    return;
  }
  if (r.check != nullptr) {
    if (auto problem = r.check(value); !problem.empty()) out.push_back({key, std::move(problem)});
  }
}

void check_value(const std::string& key, int64_t value, const rule& r, std::vector<issue>& out) {
  if (value < r.min)
    out.push_back(
        {key, "must be at least " + std::to_string(r.min) + ", got " + std::to_string(value)});
  else if (value > r.max)
    out.push_back(
        {key, "must be at most " + std::to_string(r.max) + ", got " + std::to_string(value)});
}

void check_value(const std::string& key, double value, const rule& r, std::vector<issue>& out) {
  auto got = ", got " + display_real(value);
  if (std::isnan(value))
    out.push_back({key, "must be a number" + got});
  else if (std::isinf(value))
    out.push_back({key, "must be finite" + got});
  else if (r.real_min_exclusive && value <= r.real_min)
    out.push_back({key, "must be greater than " + display_real(r.real_min) + got});
  else if (value < r.real_min)
    out.push_back({key, "must be at least " + display_real(r.real_min) + got});
  else if (value > r.real_max)
    out.push_back({key, "must be at most " + display_real(r.real_max) + got});
}

void check_value(const std::string& key, const std::vector<std::string>& value, const rule& r,
                 std::vector<issue>& out) {
  for (size_t i = 0; i < value.size(); ++i)
    check_value(key + "[" + std::to_string(i) + "]", value[i], r, out);
}

std::vector<issue> find_issues(const pipeline& cfg) {
  std::vector<issue> out;
  value_checker checker{out, {}};
  sections(checker, cfg);
  // -- rules between values --
  const std::string executors{executors_key};
  if (cfg.auto_executors && !cfg.executors.empty())
    out.push_back({executors, "lists " + std::to_string(cfg.executors.size()) +
                                  " executor(s) while auto_executors is set"});
  // No local executor is fine when workers (cluster.remote) do the work.
  if (!cfg.auto_executors && cfg.executors.empty() && cfg.cluster.remote.empty())
    out.push_back({executors, "must list at least one executor, or be \"auto\""});
  const int64_t block_size = cfg.kv_cache.block_size;
  if (block_size >= 8 && block_size <= 1024 && (block_size & (block_size - 1)) != 0)
    out.push_back({"kv_cache.block_size",
                   "must be a power of two from 8 to 1024, got " + std::to_string(block_size)});
  const auto& remote = cfg.cluster.remote;
  for (size_t i = 0; i < remote.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (remote[i] == remote[j]) {
        out.push_back({"cluster.remote[" + std::to_string(i) + "]",
                       "repeats cluster.remote[" + std::to_string(j) + "] ('" + remote[i] + "')"});
        break;
      }
    }
  }
  // The seed policy runs a whole batch on one executor, so a batch must fit in its slots.
  if (cfg.batcher.policy == "seed") {
    const auto executors_used = resolve_executors(cfg, 1);
    for (size_t i = 0; i < executors_used.size(); ++i) {
      auto slots = executors_used[i].slots;
      if (slots >= 1 && cfg.batcher.max_batch_size > slots) {
        auto whose =
            cfg.auto_executors ? std::string{"an automatic executor"} : executor_key(i) + ".slots";
        out.push_back({"batcher.max_batch_size", "must not exceed the slots of " + whose + " (" +
                                                     std::to_string(slots) +
                                                     ") under the seed policy, got " +
                                                     std::to_string(cfg.batcher.max_batch_size)});
        break;
      }
    }
  }
  return out;
}

std::string executor_key(size_t i) {
  return std::string{executors_key} + "[" + std::to_string(i) + "]";
}

// -- key helpers
// -----------------------------------------------------------------------------------

size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: insertions, deletions, substitutions and swaps of neighbours.
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string suggest(std::string_view unknown_key) {
  std::string index;
  auto key = canonical(unknown_key, index);
  auto [parent, leaf] = split_last(key);
  auto lister = list_keys();
  // A near miss: a few edits, but not none (an exact match is no misspelling).
  auto near = [](std::string_view typed, std::string_view known) {
    auto d = edit_distance(typed, known);
    return d > 0 && d <= std::max<size_t>(1, typed.size() / 3) ? d : std::string::npos;
  };
  std::string best;
  size_t best_distance = std::string::npos;
  auto consider = [&](const std::string& candidate, size_t distance) {
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  };
  // 1. A near miss among the keys of the same table (or among the top-level names).
  if (parent.empty()) {
    for (const auto& name : lister.top) consider(name, near(leaf, name));
  } else {
    for (const auto& candidate : lister.all) {
      auto [candidate_parent, candidate_leaf] = split_last(candidate);
      if (candidate_parent == parent) consider(candidate, near(leaf, candidate_leaf));
    }
  }
  if (!best.empty()) return restore(best, index);
  // 2. A misspelt table name with the right key, or a near miss of it.
  for (const auto& candidate : lister.all) {
    auto [candidate_parent, candidate_leaf] = split_last(candidate);
    auto parent_distance = near(parent, candidate_parent);
    if (parent.empty() || parent_distance == std::string::npos) continue;
    auto leaf_distance = leaf == candidate_leaf ? 0 : near(leaf, candidate_leaf);
    if (leaf_distance != std::string::npos) consider(candidate, parent_distance + leaf_distance);
  }
  if (!best.empty()) return restore(best, index);
  // 3. The same name in another table ("port" at the top means "server.port").
  for (const auto& candidate : lister.all)
    if (candidate != key && split_last(candidate).second == leaf) return restore(candidate, index);
  return {};
}

std::string unknown_key_message(std::string_view unknown_key) {
  auto msg = "unknown key '" + std::string{unknown_key} + "'";
  if (auto hint = suggest(unknown_key); !hint.empty()) msg += "; did you mean '" + hint + "'?";
  return msg;
}

std::string format_real(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  auto str = display_real(x);
  if (str.find_first_of(".eE") == std::string::npos) str += ".0";
  return str;
}

}  // namespace conveyor::config::detail

namespace conveyor::config {

std::vector<std::string> keys() {
  return detail::list_keys().all;
}

}  // namespace conveyor::config
