// Benchmark workloads: requests with a scheduled arrival, loaded from or saved to JSONL, or
// generated with Poisson arrivals (see workloads/README.md for the format).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace conveyor::bench {

// -- requests ------------------------------------------------------------------------------------

/// One request of a workload: sent at t0 + `arrival_s`, whatever earlier requests are doing.
struct workload_request {
  /// Names the request in reports ("r0001").
  std::string id;
  /// Seconds after the start of the replay.
  double arrival_s = 0;
  /// Plain text; the pipeline tokenizes it (BOS first).
  std::string prompt;
  /// The generation limit.
  int32_t max_tokens = 16;
};

/// A workload: requests in arrival order.
using workload = std::vector<workload_request>;

// -- generation ----------------------------------------------------------------------------------

/// What `generate_workload` makes.
struct workload_spec {
  /// Mean arrivals per second (Poisson); infinity puts every request at 0.0.
  double rate = 10;
  /// Number of requests.
  std::size_t requests = 100;
  /// Seeds every random choice: the same spec gives the same workload.
  uint64_t seed = 0;
  /// Prompt words, uniform in [min_words, max_words].
  int32_t min_words = 3;
  int32_t max_words = 40;
  /// max_tokens, log-uniform in [min_tokens, max_tokens].
  int32_t min_tokens = 16;
  int32_t max_tokens = 256;
};

/// The mean arrival rate: (n - 1) / last arrival; infinity when every request arrives at 0.
double rate_of(const workload& requests);

/// Checks a spec's ranges; names the first bad one.
error validate(const workload_spec& spec);

/// Makes a workload: exponential gaps of mean 1 / rate with the first request at 0.0, prompts of
/// words drawn from a small children's-story vocabulary, ids "r0000", "r0001", ... Deterministic
/// for a spec (its own generators, not std::*_distribution, whose results vary by library).
workload generate_workload(const workload_spec& spec);

// -- JSONL ---------------------------------------------------------------------------------------

/// One JSON object per line: {"id", "arrival_s", "prompt", "max_tokens"}. `id` may be absent
/// (the line number is used); blank lines are skipped. Errors name `source` and the line.
expected<workload> parse_workload(std::istream& in, const std::string& source = "workload");

/// Reads a JSONL file.
expected<workload> load_workload(const std::string& path);

/// The workload as JSONL, one request per line.
std::string to_jsonl(const workload& requests);

/// Writes `to_jsonl` to `path`.
error save_workload(const workload& requests, const std::string& path);

}  // namespace conveyor::bench
