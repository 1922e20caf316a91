// Metrics aggregation: counters, histograms and gauges from timing events.
#include "pipeline/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <utility>


namespace conveyor::pipeline {

namespace {

// -- constants -----------------------------------------------------------------------------------

// Bucket bounds, chosen to resolve both the tiny CPU model (sub-millisecond steps) and large
// models on GPUs (seconds).

// Seconds waiting in the queue.
const std::vector<double> queue_time_bounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                               0.25,   0.5,   1,      2.5,   5,    10,    30,   60};

// Seconds to the first token.
const std::vector<double> ttft_bounds = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06,
                                         0.08,  0.1,    0.25,  0.5,  0.75, 1,    2.5,
                                         5,     7.5,    10,    20,   40,   80};

// Seconds per token (inter-token latency, time per output token).
const std::vector<double> token_time_bounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                               0.025,  0.05,    0.075,  0.1,   0.15,   0.2,   0.3,
                                               0.4,    0.5,     0.75,   1,     2.5};

// Seconds from arrival to the end.
const std::vector<double> e2e_bounds = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,  2.5,
                                        5,    10,    15,   20,  30,   40,  60, 120};

// Tokens per request.
const std::vector<double> token_count_bounds = {1,   8,    16,   32,   64,   128,  256,
                                                512, 1024, 2048, 4096, 8192, 16384};

// Sequences per step.
const std::vector<double> batch_size_bounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};

// Fraction of padding tokens per step.
const std::vector<double> padding_fraction_bounds = {0,   0.05, 0.1, 0.2, 0.3, 0.4,
                                                     0.5, 0.6,  0.7, 0.8, 0.9};

// Seconds per step.
const std::vector<double> step_time_bounds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};

// -- utilities -----------------------------------------------------------------------------------

double seconds(duration x) {
  return std::chrono::duration<double>(x).count();
}

// A block count from a step; a negative one (never sent) counts as 0.
uint64_t count_of(int32_t blocks) {
  return blocks > 0 ? static_cast<uint64_t>(blocks) : 0;
}

}  // namespace

// -- registry: constructors ----------------------------------------------------------------------

metrics_registry::metrics_registry(clock_function now, std::size_t reservoir_capacity)
    : now_(std::move(now)),
      queue_time_(queue_time_bounds, reservoir_capacity),
      time_to_first_token_(ttft_bounds, reservoir_capacity),
      inter_token_latency_(token_time_bounds, reservoir_capacity),
      time_per_output_token_(token_time_bounds, reservoir_capacity),
      e2e_latency_(e2e_bounds, reservoir_capacity),
      request_prompt_tokens_(token_count_bounds, reservoir_capacity),
      request_output_tokens_(token_count_bounds, reservoir_capacity),
      batch_size_(batch_size_bounds, reservoir_capacity),
      padding_fraction_(padding_fraction_bounds, reservoir_capacity),
      step_time_{histogram{step_time_bounds, reservoir_capacity},
                 histogram{step_time_bounds, reservoir_capacity}} {
  // nop
}

// -- registry: recording -------------------------------------------------------------------------

void metrics_registry::record(const request_timing& x) {
  ++requests_[static_cast<std::size_t>(x.outcome)];
  generation_tokens_total_ += x.output_tokens;
  prefix_cache_queries_total_ += x.cache_queried_tokens;
  prefix_cache_hits_total_ += x.cached_tokens;
  first_arrival_ = std::min(first_arrival_, x.arrival);
  last_end_ = std::max(last_end_, x.finished);
  if (x.admitted) prompt_tokens_total_ += x.prompt_tokens;
  if (x.queued && x.admitted) queue_time_.observe(seconds(*x.admitted - *x.queued));
  if (x.first_token) time_to_first_token_.observe(seconds(*x.first_token - x.arrival));
  for (std::size_t i = 1; i < x.token_times.size(); ++i)
    inter_token_latency_.observe(seconds(x.token_times[i] - x.token_times[i - 1]));
  if (x.outcome != outcome::finished) return;
  if (x.reason == finish_reason::stop)
    ++finished_stop_;
  else if (x.reason == finish_reason::length)
    ++finished_length_;
  e2e_latency_.observe(seconds(x.finished - x.arrival));
  request_prompt_tokens_.observe(static_cast<double>(x.prompt_tokens));
  request_output_tokens_.observe(static_cast<double>(x.output_tokens));
  if (x.first_token && x.output_tokens >= 2)
    time_per_output_token_.observe(seconds(x.finished - *x.first_token) /
                                   static_cast<double>(x.output_tokens - 1));
}

void metrics_registry::record(const step_timing& x) {
  batch_size_.observe(static_cast<double>(x.batch_size));
  step_time_[static_cast<std::size_t>(x.kind)].observe(seconds(x.elapsed));
  if (x.padded_tokens > 0) {
    auto padding = x.padded_tokens > x.tokens ? x.padded_tokens - x.tokens : 0;
    padding_fraction_.observe(static_cast<double>(padding) / static_cast<double>(x.padded_tokens));
  }
  auto& busy = busy_.try_emplace(x.executor, executor_busy{x.start, 0}).first->second;
  busy.started = std::min(busy.started, x.start);
  busy.busy_seconds += seconds(x.elapsed);
  ++busy.steps;
  // All 0 from an executor without a block pool; a pool always has used or free blocks.
  const bool reported = x.kv_blocks_used != 0 || x.kv_blocks_cached != 0 || x.kv_blocks_free != 0;
  if (reported || kv_blocks_.count(x.executor) > 0)
    kv_blocks_[x.executor] = kv_block_gauges{
        count_of(x.kv_blocks_used), count_of(x.kv_blocks_cached), count_of(x.kv_blocks_free)};
}

void metrics_registry::record(const executor_started& x) {
  busy_[x.executor] = executor_busy{x.at, 0, 0};
  kv_blocks_.erase(x.executor);
  if (!x.device.empty()) devices_[x.executor] = x.device;
}

void metrics_registry::set_queue_depth(std::size_t requests) {
  queue_depth_ = requests;
}

void metrics_registry::set_running_sequences(const std::string& executor, std::size_t sequences) {
  running_sequences_[executor] = sequences;
}

void metrics_registry::reset() {
  requests_.fill(0);
  finished_stop_ = 0;
  finished_length_ = 0;
  prompt_tokens_total_ = 0;
  generation_tokens_total_ = 0;
  prefix_cache_queries_total_ = 0;
  prefix_cache_hits_total_ = 0;
  first_arrival_ = time_point::max();
  last_end_ = time_point::min();
  for (auto* h : {&queue_time_, &time_to_first_token_, &inter_token_latency_,
                  &time_per_output_token_, &e2e_latency_, &request_prompt_tokens_,
                  &request_output_tokens_, &batch_size_, &padding_fraction_})
    h->reset();
  for (auto& h : step_time_) h.reset();
  busy_.clear();
  running_sequences_.clear();
  kv_blocks_.clear();
  devices_.clear();
  queue_depth_ = 0;
}

// -- registry: counters --------------------------------------------------------------------------

uint64_t metrics_registry::requests(outcome x) const noexcept {
  return requests_[static_cast<std::size_t>(x)];
}

uint64_t metrics_registry::requests_total() const noexcept {
  uint64_t total = 0;
  for (auto n : requests_) total += n;
  return total;
}

uint64_t metrics_registry::finished(finish_reason x) const noexcept {
  switch (x) {
    case finish_reason::stop:
      return finished_stop_;
    case finish_reason::length:
      return finished_length_;
    case finish_reason::none:
      break;
  }
  return 0;
}

double metrics_registry::tokens_per_second() const noexcept {
  if (last_end_ <= first_arrival_) return 0;
  return static_cast<double>(generation_tokens_total_) / seconds(last_end_ - first_arrival_);
}

double metrics_registry::prefix_cache_hit_rate() const noexcept {
  if (prefix_cache_queries_total_ == 0) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(prefix_cache_hits_total_) /
         static_cast<double>(prefix_cache_queries_total_);
}

// -- registry: histograms and gauges -------------------------------------------------------------

const histogram& metrics_registry::step_time(step_kind x) const noexcept {
  return step_time_[static_cast<std::size_t>(x)];
}

std::vector<std::string> metrics_registry::executors() const {
  std::set<std::string> names;
  for (const auto& [name, busy] : busy_) names.insert(name);
  for (const auto& [name, sequences] : running_sequences_) names.insert(name);
  for (const auto& [name, device] : devices_) names.insert(name);
  return {names.begin(), names.end()};
}

uint64_t metrics_registry::executor_steps(const std::string& executor) const {
  auto i = busy_.find(executor);
  return i == busy_.end() ? 0 : i->second.steps;
}

std::string metrics_registry::executor_device(const std::string& executor) const {
  auto i = devices_.find(executor);
  return i == devices_.end() ? std::string{} : i->second;
}

double metrics_registry::busy_seconds(const std::string& executor) const {
  auto i = busy_.find(executor);
  return i == busy_.end() ? 0.0 : i->second.busy_seconds;
}

double metrics_registry::busy_ratio(const std::string& executor) const {
  auto i = busy_.find(executor);
  if (i == busy_.end()) return 0;
  auto wall = seconds(now_() - i->second.started);
  if (wall <= 0) return 0;
  return std::clamp(i->second.busy_seconds / wall, 0.0, 1.0);
}

std::size_t metrics_registry::running_sequences(const std::string& executor) const {
  auto i = running_sequences_.find(executor);
  return i == running_sequences_.end() ? 0 : i->second;
}

std::optional<kv_block_gauges> metrics_registry::kv_blocks(const std::string& executor) const {
  auto i = kv_blocks_.find(executor);
  if (i == kv_blocks_.end()) return std::nullopt;
  return i->second;
}

// -- registry: summary ---------------------------------------------------------------------------

summary metrics_registry::summarize() const {
  summary x;
  x.finished = requests(outcome::finished);
  x.cancelled = requests(outcome::cancelled);
  x.expired = requests(outcome::expired);
  x.rejected = requests(outcome::rejected);
  x.failed = requests(outcome::failed);
  x.prompt_tokens = prompt_tokens_total_;
  x.generation_tokens = generation_tokens_total_;
  x.queue_time_p50 = queue_time_.percentile(50);
  x.queue_time_p99 = queue_time_.percentile(99);
  x.ttft_p50 = time_to_first_token_.percentile(50);
  x.ttft_p99 = time_to_first_token_.percentile(99);
  x.itl_mean = inter_token_latency_.mean();
  x.tpot_p50 = time_per_output_token_.percentile(50);
  x.e2e_p50 = e2e_latency_.percentile(50);
  x.e2e_p99 = e2e_latency_.percentile(99);
  x.batch_size_mean = batch_size_.mean();
  x.padding_fraction_mean = padding_fraction_.mean();
  x.tokens_per_second = tokens_per_second();
  x.prefix_cache_hit_rate = prefix_cache_hit_rate();
  uint64_t used = 0;
  uint64_t blocks = 0;
  for (const auto& [name, kv] : kv_blocks_) {
    used += kv.used;
    blocks += kv.used + kv.free;
  }
  x.kv_cache_usage = blocks == 0 ? std::numeric_limits<double>::quiet_NaN()
                                 : static_cast<double>(used) / static_cast<double>(blocks);
  return x;
}

}  // namespace conveyor::pipeline
