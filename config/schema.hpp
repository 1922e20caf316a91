// The one description of every key: its name, its place in the structs and the rule its value
// obeys. Loading, overrides, validation, printing and comparison all walk this description, so a
// new key is added here once. Internal to config/ (and its tests); free of toml++.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "common/deadline.hpp"
#include "config/config.hpp"

namespace conveyor::config::detail {

// -- rules
// -----------------------------------------------------------------------------------------

/// Checks a string and returns what is wrong with it, or an empty string.
using string_check = std::string (*)(std::string_view value);

/// What a value must satisfy. Integer fields use `min`/`max`, real fields `real_min`/`real_max`,
/// string fields (and each string of a list) `choices`, `not_empty` and `check`.
struct rule {
  /// Smallest allowed integer.
  int64_t min = std::numeric_limits<int64_t>::min();
  /// Largest allowed integer.
  int64_t max = std::numeric_limits<int64_t>::max();
  /// Smallest allowed real.
  double real_min = std::numeric_limits<double>::lowest();
  /// Whether `real_min` itself is excluded.
  bool real_min_exclusive = false;
  /// Largest allowed real.
  double real_max = std::numeric_limits<double>::max();
  /// Allowed strings; empty allows any.
  std::vector<std::string_view> choices;
  /// Whether an empty string is refused.
  bool not_empty = false;
  /// Any further check of a string.
  string_check check = nullptr;
};

/// No constraint.
inline rule any() {
  return {};
}

/// An integer of at least `n`.
inline rule at_least(int64_t n) {
  rule r;
  r.min = n;
  return r;
}

/// An integer in [lo, hi].
inline rule between(int64_t lo, int64_t hi) {
  rule r;
  r.min = lo;
  r.max = hi;
  return r;
}

/// A finite real in [lo, hi], or (lo, hi] when `lo_exclusive`.
inline rule real_between(double lo, double hi, bool lo_exclusive = false) {
  rule r;
  r.real_min = lo;
  r.real_max = hi;
  r.real_min_exclusive = lo_exclusive;
  return r;
}

/// A string out of `choices`.
inline rule one_of(std::initializer_list<std::string_view> choices) {
  rule r;
  r.choices = choices;
  return r;
}

/// A non-empty string that passes `check` (when given).
inline rule non_empty(string_check check = nullptr) {
  rule r;
  r.not_empty = true;
  r.check = check;
  return r;
}

/// A string (or each string of a list) that passes `check`.
inline rule checked(string_check check) {
  rule r;
  r.check = check;
  return r;
}

// -- bounds
// ----------------------------------------------------------------------------------------
//
// Every integer key has an upper bound, so that no value is narrowed or overflows where it is
// used: counts that become int32_t, durations that become milliseconds or nanoseconds.

/// The largest count kept in an int32_t (slots, context, batch sizes, tokens).
inline constexpr int64_t max_int32 = std::numeric_limits<int32_t>::max();

/// The most threads or workers of one kind (executor threads, tokenizer workers, I/O threads).
inline constexpr int64_t max_threads = 1024;

/// The longest duration, in seconds: the longest deadline (a year, common/deadline.hpp); in
/// nanoseconds far below 2^63.
inline constexpr int64_t max_duration_s = static_cast<int64_t>(max_timeout_s);

/// Beast's limit of a request head is a uint32_t.
inline constexpr int64_t max_header_limit = std::numeric_limits<uint32_t>::max();

/// Problem of a `model.path`: refuses unknown "synthetic:" sizes.
std::string check_model_path(std::string_view value);

/// Problem of a `model.dtype` or `model.kv_cache_dtype`: "auto", "f32" or "bf16".
std::string check_dtype(std::string_view value);

/// Problem of a `model.dtype`: a dtype, or a type to quantize weights to at load ("q8_0",
/// "q4_0").
std::string check_model_dtype(std::string_view value);

/// Problem of a `model.tool_call_parser`: "", "hermes" or "llama3_json".
std::string check_tool_call_parser(std::string_view value);

/// Problem of an executor device: "cpu", "cuda" or "cuda:N".
std::string check_device(std::string_view value);

/// Problem of a remote endpoint: "host:port".
std::string check_endpoint(std::string_view value);

// -- problems
// --------------------------------------------------------------------------------------

/// One thing wrong with a configuration: the dotted key and what is wrong with its value.
struct issue {
  /// The key, e.g. "batcher.max_batch_size" or "executors[1].device".
  std::string key;
  /// E.g. "must be at least 1, got 0".
  std::string message;
};

/// Appends the problems of one value under `key` to `out`.
void check_value(const std::string& key, const std::string& value, const rule& r,
                 std::vector<issue>& out);

/// Appends the problems of one value under `key` to `out`.
void check_value(const std::string& key, int64_t value, const rule& r, std::vector<issue>& out);

/// Appends the problems of one value under `key` to `out`.
void check_value(const std::string& key, double value, const rule& r, std::vector<issue>& out);

/// Booleans have no problems.
inline void check_value(const std::string&, bool, const rule&, std::vector<issue>&) {
  // nothing to check
}

/// Appends the problems of each string, keyed `key[i]`, to `out`.
void check_value(const std::string& key, const std::vector<std::string>& value, const rule& r,
                 std::vector<issue>& out);

/// Every problem of `cfg`: each value against its rule, then the rules between values.
std::vector<issue> find_issues(const pipeline& cfg);

// -- the schema
// ------------------------------------------------------------------------------------
//
// `fields(v, section)` calls `v(key, member, rule)` for every key of one section, in file order.
// `sections(v, cfg)` calls `v.section(name, member)` for every table and
// `v.executor_list(auto_executors, executors)` where the executors belong.
// Both take const and non-const structs.

/// Enables an overload for `S` being `T` or `const T`.
template <class S, class T>
using if_is = std::enable_if_t<std::is_same_v<std::remove_const_t<S>, T>, int>;

/// The keys of `[model]`.
template <class V, class S, if_is<S, model> = 0>
void fields(V& v, S& x) {
  v("path", x.path, non_empty(check_model_path));
  v("tokenizer", x.tokenizer, any());
  v("name", x.name, any());
  v("seed", x.seed, at_least(0));
  v("chat_template", x.chat_template, any());
  v("tool_call_parser", x.tool_call_parser, checked(check_tool_call_parser));
  v("dtype", x.dtype, checked(check_model_dtype));
  v("kv_cache_dtype", x.kv_cache_dtype, checked(check_dtype));
  v("bf16_inputs", x.bf16_inputs, any());
}

/// The keys of `[tokenizer]`.
template <class V, class S, if_is<S, tokenizer> = 0>
void fields(V& v, S& x) {
  v("workers", x.workers, between(1, max_threads));
}

/// The keys of `[kv_cache]`.
template <class V, class S, if_is<S, kv_cache> = 0>
void fields(V& v, S& x) {
  v("block_size", x.block_size, between(8, 1024));
  v("memory_mb", x.memory_mb, between(0, max_int32));
  v("prefix_caching", x.prefix_caching, any());
}

/// The keys of `[structured_outputs]`.
template <class V, class S, if_is<S, structured_outputs> = 0>
void fields(V& v, S& x) {
  v("compile_timeout_ms", x.compile_timeout_ms, between(1, 3600000));
  v("max_compiling", x.max_compiling, between(1, 1024));
  v("max_spec_kb", x.max_spec_kb, between(1, 1 << 20));
  v("cache_mb", x.cache_mb, between(0, max_int32));
}

/// The keys of one `[[executors]]` table.
template <class V, class S, if_is<S, executor> = 0>
void fields(V& v, S& x) {
  v("device", x.device, checked(check_device));
  v("threads", x.threads, between(0, max_threads));
  v("slots", x.slots, between(1, max_int32));
  v("context", x.context, between(0, max_int32));
  v("max_batched_tokens", x.max_batched_tokens, between(1, max_int32));
  v("step_target_ratio", x.step_target_ratio, real_between(1.0, 1000.0));
  v("step_target_ms", x.step_target_ms, real_between(0.0, 3600000.0));
  v("min_prefill_tokens", x.min_prefill_tokens, between(1, max_int32));
}

/// The keys of `[cluster]`.
template <class V, class S, if_is<S, cluster> = 0>
void fields(V& v, S& x) {
  v("remote", x.remote, checked(check_endpoint));
}

/// The keys of `[batcher]`.
template <class V, class S, if_is<S, batcher> = 0>
void fields(V& v, S& x) {
  v("policy", x.policy, one_of({"sequential", "seed", "continuous"}));
  v("max_batch_size", x.max_batch_size, between(1, max_int32));
  v("max_wait_ms", x.max_wait_ms, between(0, max_duration_s * 1000));
  v("max_num_seqs", x.max_num_seqs, between(1, max_int32));
  v("max_batched_tokens", x.max_batched_tokens, between(1, max_int32));
  v("max_queued_requests", x.max_queued_requests, at_least(1));
  v("max_queued_tokens", x.max_queued_tokens, at_least(1));
  v("default_timeout_s", x.default_timeout_s, between(0, max_duration_s));
}

/// The keys of `[generation]`.
template <class V, class S, if_is<S, generation> = 0>
void fields(V& v, S& x) {
  using limits = sampling_limits;
  v("max_tokens", x.max_tokens, between(limits::min_max_tokens, limits::max_max_tokens));
  v("temperature", x.temperature, real_between(limits::min_temperature, limits::max_temperature));
  v("top_p", x.top_p, real_between(limits::min_top_p_exclusive, limits::max_top_p, true));
  v("top_k", x.top_k, between(limits::min_top_k, limits::max_top_k));
}

/// The keys of `[metrics]`.
template <class V, class S, if_is<S, metrics> = 0>
void fields(V& v, S& x) {
  v("enabled", x.enabled, any());
  v("interval_s", x.interval_s, between(0, max_duration_s));
}

/// The keys of `[server]`.
template <class V, class S, if_is<S, server> = 0>
void fields(V& v, S& x) {
  v("host", x.host, non_empty());
  v("port", x.port, between(0, 65535));
  v("max_body_bytes", x.max_body_bytes, at_least(1));
  v("max_header_bytes", x.max_header_bytes, between(1, max_header_limit));
  v("idle_timeout_s", x.idle_timeout_s, between(1, max_duration_s));
  v("header_timeout_s", x.header_timeout_s, between(1, 86400));
  v("max_connections", x.max_connections, between(1, max_int32));
  v("max_connections_per_address", x.max_connections_per_address, between(1, max_int32));
  v("drain_timeout_s", x.drain_timeout_s, between(0, max_duration_s));
  v("io_threads", x.io_threads, between(1, max_threads));
  v("max_stream_buffer_bytes", x.max_stream_buffer_bytes, at_least(1));
  v("stream_interval", x.stream_interval, between(1, 1024));
  v("stream_delay_ms", x.stream_delay_ms, between(0, 1000));
  v("max_prompts", x.max_prompts, between(1, max_int32));
  v("max_n", x.max_n, between(1, 1024));
}

/// The keys of `[log]`.
template <class V, class S, if_is<S, log> = 0>
void fields(V& v, S& x) {
  v("level", x.level, one_of({"trace", "debug", "info", "warn", "error", "critical", "off"}));
}

/// Every section of the file, in file order.
template <class V, class P, if_is<P, pipeline> = 0>
void sections(V& v, P& x) {
  v.section("model", x.model);
  v.section("tokenizer", x.tokenizer);
  v.executor_list(x.auto_executors, x.executors);
  v.section("kv_cache", x.kv_cache);
  v.section("structured_outputs", x.structured_outputs);
  v.section("cluster", x.cluster);
  v.section("batcher", x.batcher);
  v.section("generation", x.generation);
  v.section("metrics", x.metrics);
  v.section("server", x.server);
  v.section("log", x.log);
}

/// The top-level name of the executors: `executors = "auto"` or `[[executors]]`.
inline constexpr std::string_view executors_key = "executors";

/// The dotted name of executor `i`: "executors[i]".
std::string executor_key(size_t i);

// -- key helpers
// -----------------------------------------------------------------------------------

/// The number of single-character edits that turn `a` into `b`.
size_t edit_distance(std::string_view a, std::string_view b);

/// For an unknown dotted key ("batcher.polcy", "executors[0].slot", "port"), a known key the user
/// probably meant ("batcher.policy", "executors[0].slots", "server.port"), or "".
std::string suggest(std::string_view unknown_key);

/// "unknown key 'x'" plus "; did you mean 'y'?" when `suggest` finds one.
std::string unknown_key_message(std::string_view unknown_key);

/// Renders a real the shortest way that reads back exactly ("1.0", "0.95", "1e+300").
std::string format_real(double x);

}  // namespace conveyor::config::detail
