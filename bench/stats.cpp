#include "bench/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "pipeline/metrics.hpp"

namespace conveyor::bench {

const char* to_string(request_status x) {
  switch (x) {
    case request_status::completed:
      return "completed";
    case request_status::rejected:
      return "rejected";
    case request_status::failed:
      return "failed";
  }
  return "failed";
}

distribution describe(const std::vector<double>& samples) {
  distribution d;
  d.count = samples.size();
  if (samples.empty()) {
    d.mean = d.p50 = d.p90 = d.p99 = std::numeric_limits<double>::quiet_NaN();
    return d;
  }
  d.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / double(samples.size());
  d.p50 = pipeline::percentile(samples, 50);
  d.p90 = pipeline::percentile(samples, 90);
  d.p99 = pipeline::percentile(samples, 99);
  return d;
}

run_summary summarize(std::string name, double rate, const std::vector<request_record>& records,
                      double wall_s) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  run_summary s;
  s.name = std::move(name);
  s.rate = rate;
  s.requests = records.size();
  s.wall_s = wall_s;
  std::vector<double> ttft, tpot, itl, e2e, later_turns, tpot_unconstrained, tpot_constrained;
  // Every turn sent gets its place, also one that no request completed.
  std::size_t turns = 0;
  for (const auto& r : records) turns = std::max(turns, std::size_t(std::max(r.turn, 0)));
  std::vector<std::vector<double>> ttft_by_turn(turns);
  bool cached_reported = false;
  for (const auto& r : records) {
    switch (r.status) {
      case request_status::completed:
        ++s.completed;
        break;
      case request_status::rejected:
        ++s.rejected;
        continue;
      case request_status::failed:
        ++s.failed;
        continue;
    }
    s.output_tokens += uint64_t(std::max(r.output_tokens, 0));
    if (r.constrained) {
      ++s.constrained_completed;
      s.constrained_output_tokens += uint64_t(std::max(r.output_tokens, 0));
    }
    if (r.prompt_tokens) {
      s.prompt_tokens += uint64_t(std::max(*r.prompt_tokens, 0));
      s.cached_tokens += uint64_t(std::max(r.cached_tokens.value_or(0), 0));
    }
    cached_reported = cached_reported || r.cached_tokens.has_value();
    e2e.push_back(r.end);
    if (r.chunk_times.empty()) continue;
    ttft.push_back(r.chunk_times.front());
    if (r.turn > 0) ttft_by_turn[r.turn - 1].push_back(r.chunk_times.front());
    if (r.turn > 1) later_turns.push_back(r.chunk_times.front());
    if (r.output_tokens >= 2) {
      tpot.push_back((r.end - r.chunk_times.front()) / double(r.output_tokens - 1));
      (r.constrained ? tpot_constrained : tpot_unconstrained).push_back(tpot.back());
    }
    for (std::size_t i = 1; i < r.chunk_times.size(); ++i)
      itl.push_back(r.chunk_times[i] - r.chunk_times[i - 1]);
  }
  s.requests_per_s = wall_s > 0 ? double(s.completed) / wall_s : nan;
  s.output_tokens_per_s = wall_s > 0 ? double(s.output_tokens) / wall_s : nan;
  s.ttft = describe(ttft);
  s.tpot = describe(tpot);
  s.tpot_unconstrained = describe(tpot_unconstrained);
  s.tpot_constrained = describe(tpot_constrained);
  s.itl = describe(itl);
  s.e2e = describe(e2e);
  for (const auto& samples : ttft_by_turn) s.ttft_by_turn.push_back(describe(samples));
  s.ttft_later_turns = describe(later_turns);
  s.prefix_cache_hit_rate = cached_reported && s.prompt_tokens > 0
                                ? double(s.cached_tokens) / double(s.prompt_tokens)
                                : nan;
  s.batch_size_mean = s.padding_fraction = s.executor_busy_ratio = s.process_cpu_s = nan;
  std::sort(e2e.begin(), e2e.end());
  s.e2e_sorted = std::move(e2e);
  return s;
}

}  // namespace conveyor::bench
