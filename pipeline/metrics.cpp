// Metrics aggregation: histograms, counters, gauges and their renderings.
#include "pipeline/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

namespace conveyor::pipeline {

namespace {

// -- constants -----------------------------------------------------------------------------------

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

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

constexpr outcome all_outcomes[] = {outcome::finished, outcome::cancelled, outcome::expired,
                                    outcome::rejected, outcome::failed};

constexpr step_kind all_step_kinds[] = {step_kind::prefill, step_kind::decode};

constexpr finish_reason all_finish_reasons[] = {finish_reason::stop, finish_reason::length};

// -- utilities -----------------------------------------------------------------------------------

double seconds(duration x) {
  return std::chrono::duration<double>(x).count();
}

// One step of splitmix64: a small, fast generator that is the same on every platform.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t reservoir_seed = 0x636f6e7665796f72ULL;  // "conveyor"

// -- Prometheus text -----------------------------------------------------------------------------

// Renders a sample value as Prometheus (and Go's ParseFloat) reads it: integers without a
// fraction, others in the shortest form that round-trips, and +Inf, -Inf, NaN.
std::string format_value(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "+Inf" : "-Inf";
  if (x == std::floor(x) && std::abs(x) < 9007199254740992.0) {  // 2^53: exact integers
    return std::to_string(static_cast<int64_t>(x));
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::general);
  return std::string(buf, res.ptr);
}

// Escapes a label value: backslash, double quote and line feed.
std::string escape_label_value(std::string_view x) {
  std::string out;
  out.reserve(x.size());
  for (char c : x) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Renders `{name="value"}`, or nothing for an empty name.
std::string label(std::string_view name, std::string_view value) {
  if (name.empty()) return {};
  std::string out = "{";
  out += name;
  out += "=\"";
  out += escape_label_value(value);
  out += "\"}";
  return out;
}

// Writes the `# HELP` and `# TYPE` lines of a metric family. Help texts here hold neither
// backslashes nor line feeds, the two characters HELP would need escaped.
void write_header(std::string& out, std::string_view name, std::string_view help,
                  std::string_view type) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

// Writes one sample line.
void write_sample(std::string& out, std::string_view name, const std::string& labels,
                  double value) {
  out += name;
  out += labels;
  out += ' ';
  out += format_value(value);
  out += '\n';
}

// Writes the series of one histogram: cumulative buckets ending in +Inf, then sum and count.
// `label_name` and `label_value` name one extra label, or nothing when `label_name` is empty.
void write_histogram_series(std::string& out, std::string_view name, const histogram& h,
                            std::string_view label_name = {}, std::string_view label_value = {}) {
  std::string prefix = "{";
  if (!label_name.empty()) {
    prefix += label_name;
    prefix += "=\"";
    prefix += escape_label_value(label_value);
    prefix += "\",";
  }
  auto counts = h.cumulative_counts();
  const auto& bounds = h.upper_bounds();
  for (std::size_t i = 0; i < counts.size(); ++i) {
    out += name;
    out += "_bucket";
    out += prefix;
    out += "le=\"";
    out += i < bounds.size() ? format_value(bounds[i]) : std::string{"+Inf"};
    out += "\"} ";
    out += std::to_string(counts[i]);
    out += '\n';
  }
  auto labels = label(label_name, label_value);
  write_sample(out, std::string{name} + "_sum", labels, h.sum());
  out += name;
  out += "_count";
  out += labels;
  out += ' ';
  out += std::to_string(h.count());
  out += '\n';
}

void write_histogram(std::string& out, std::string_view name, std::string_view help,
                     const histogram& h) {
  write_header(out, name, help, "histogram");
  write_histogram_series(out, name, h);
}

void write_counter(std::string& out, std::string_view name, std::string_view help, uint64_t value) {
  write_header(out, name, help, "counter");
  out += name;
  out += ' ';
  out += std::to_string(value);
  out += '\n';
}

// -- JSON and summary ----------------------------------------------------------------------------

nlohmann::json json_number(double x) {
  if (std::isnan(x) || std::isinf(x)) return nullptr;
  return x;
}

nlohmann::json json_histogram(const histogram& h) {
  return {{"count", h.count()},
          {"sum", json_number(h.sum())},
          {"mean", json_number(h.mean())},
          {"p50", json_number(h.percentile(50))},
          {"p90", json_number(h.percentile(90))},
          {"p99", json_number(h.percentile(99))}};
}

// Renders seconds for a log line: "12.3ms" below a second, "1.2s" above, "-" for NaN.
std::string format_seconds(double x) {
  if (std::isnan(x)) return "-";
  char buf[32];
  if (std::abs(x) < 1)
    std::snprintf(buf, sizeof(buf), "%.3gms", x * 1000);
  else
    std::snprintf(buf, sizeof(buf), "%.3gs", x);
  return buf;
}

// Renders a plain number with `format` (one double), or "-" for NaN.
std::string format_number(const char* format, double x) {
  if (std::isnan(x)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), format, x);
  return buf;
}

}  // namespace

// -- percentiles ---------------------------------------------------------------------------------

double percentile(std::vector<double> samples, double q) {
  if (samples.empty() || std::isnan(q)) return nan;
  q = std::clamp(q, 0.0, 100.0);
  auto rank = static_cast<double>(samples.size() - 1) * q / 100.0;
  auto lower = static_cast<std::size_t>(std::floor(rank));
  auto fraction = rank - static_cast<double>(lower);
  auto lower_pos = samples.begin() + static_cast<std::ptrdiff_t>(lower);
  std::nth_element(samples.begin(), lower_pos, samples.end());
  auto lower_value = *lower_pos;
  if (fraction == 0 || lower + 1 >= samples.size()) return lower_value;
  // After nth_element, the next rank is the smallest element behind `lower_pos`.
  auto upper_value = *std::min_element(lower_pos + 1, samples.end());
  return lower_value + fraction * (upper_value - lower_value);
}

// -- histogram -----------------------------------------------------------------------------------

histogram::histogram(std::vector<double> upper_bounds, std::size_t reservoir_capacity)
    : upper_bounds_(std::move(upper_bounds)),
      bucket_counts_(upper_bounds_.size() + 1, 0),
      reservoir_capacity_(reservoir_capacity),
      rng_state_(reservoir_seed) {
  for (std::size_t i = 0; i < upper_bounds_.size(); ++i) {
    if (!std::isfinite(upper_bounds_[i]) || (i > 0 && upper_bounds_[i - 1] >= upper_bounds_[i]))
      throw std::invalid_argument("histogram bounds must be finite and strictly ascending");
  }
}

void histogram::observe(double x) {
  if (std::isnan(x)) return;
  auto bucket = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), x);
  ++bucket_counts_[static_cast<std::size_t>(bucket - upper_bounds_.begin())];
  // Algorithm R: the n-th observation (0-based) replaces a random slot with probability
  // capacity / (n + 1), so the reservoir stays a uniform sample of everything observed.
  if (reservoir_.size() < reservoir_capacity_) {
    reservoir_.push_back(x);
  } else if (reservoir_capacity_ > 0) {
    auto slot = next_random(rng_state_) % (count_ + 1);
    if (slot < reservoir_capacity_) reservoir_[slot] = x;
  }
  ++count_;
  sum_ += x;
}

void histogram::reset() {
  std::fill(bucket_counts_.begin(), bucket_counts_.end(), 0);
  count_ = 0;
  sum_ = 0;
  reservoir_.clear();
  rng_state_ = reservoir_seed;
}

std::vector<uint64_t> histogram::cumulative_counts() const {
  std::vector<uint64_t> result(bucket_counts_.size());
  std::partial_sum(bucket_counts_.begin(), bucket_counts_.end(), result.begin());
  return result;
}

double histogram::mean() const noexcept {
  return count_ == 0 ? nan : sum_ / static_cast<double>(count_);
}

double histogram::percentile(double q) const {
  return pipeline::percentile(reservoir_, q);
}

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
}

void metrics_registry::record(const executor_started& x) {
  busy_[x.executor] = executor_busy{x.at, 0, 0};
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
  first_arrival_ = time_point::max();
  last_end_ = time_point::min();
  for (auto* h : {&queue_time_, &time_to_first_token_, &inter_token_latency_,
                  &time_per_output_token_, &e2e_latency_, &request_prompt_tokens_,
                  &request_output_tokens_, &batch_size_, &padding_fraction_})
    h->reset();
  for (auto& h : step_time_) h.reset();
  busy_.clear();
  running_sequences_.clear();
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

// -- registry: rendering -------------------------------------------------------------------------

std::string metrics_registry::prometheus_text() const {
  std::string out;
  out.reserve(16 * 1024);
  // Counters.
  write_header(out, "conveyor_requests_total", "Requests that ended, by outcome.", "counter");
  for (auto x : all_outcomes)
    write_sample(out, "conveyor_requests_total", label("outcome", to_string(x)),
                 static_cast<double>(requests(x)));
  write_header(out, "conveyor_finished_requests_total",
               "Finished requests, by the reason they stopped.", "counter");
  for (auto x : all_finish_reasons)
    write_sample(out, "conveyor_finished_requests_total", label("reason", to_string(x)),
                 static_cast<double>(finished(x)));
  write_counter(out, "conveyor_prompt_tokens_total", "Prompt tokens of admitted requests.",
                prompt_tokens_total_);
  write_counter(out, "conveyor_generation_tokens_total", "Output tokens generated.",
                generation_tokens_total_);
  // Request histograms.
  write_histogram(out, "conveyor_queue_time_seconds",
                  "Seconds a request waited in the queue before admission.", queue_time_);
  write_histogram(out, "conveyor_time_to_first_token_seconds",
                  "Seconds from a request's arrival to its first output token.",
                  time_to_first_token_);
  write_histogram(out, "conveyor_inter_token_latency_seconds",
                  "Seconds between consecutive output tokens of a request.", inter_token_latency_);
  write_histogram(out, "conveyor_time_per_output_token_seconds",
                  "Seconds per output token after the first, per finished request.",
                  time_per_output_token_);
  write_histogram(out, "conveyor_e2e_latency_seconds",
                  "Seconds from a request's arrival to its end, per finished request.",
                  e2e_latency_);
  write_histogram(out, "conveyor_request_prompt_tokens", "Prompt tokens per finished request.",
                  request_prompt_tokens_);
  write_histogram(out, "conveyor_request_output_tokens", "Output tokens per finished request.",
                  request_output_tokens_);
  // Step histograms.
  write_histogram(out, "conveyor_batch_size", "Sequences per executor step.", batch_size_);
  write_histogram(out, "conveyor_padding_fraction",
                  "Fraction of padding among the tokens of an executor step.", padding_fraction_);
  write_header(out, "conveyor_step_time_seconds", "Seconds per executor step, by kind.",
               "histogram");
  for (auto x : all_step_kinds)
    write_histogram_series(out, "conveyor_step_time_seconds", step_time(x), "kind", to_string(x));
  // Executors.
  write_header(out, "conveyor_executor_busy_seconds_total",
               "Seconds an executor spent running steps.", "counter");
  for (const auto& [name, busy] : busy_)
    write_sample(out, "conveyor_executor_busy_seconds_total", label("executor", name),
                 busy.busy_seconds);
  write_header(out, "conveyor_executor_busy_ratio",
               "Busy seconds of an executor over the seconds since it started.", "gauge");
  for (const auto& [name, busy] : busy_)
    write_sample(out, "conveyor_executor_busy_ratio", label("executor", name), busy_ratio(name));
  write_header(out, "conveyor_executor_steps_total", "Steps an executor ran.", "counter");
  for (const auto& [name, busy] : busy_)
    write_sample(out, "conveyor_executor_steps_total", label("executor", name),
                 static_cast<double>(busy.steps));
  write_header(out, "conveyor_executor_info", "The device each executor runs on (always 1).",
               "gauge");
  for (const auto& [name, device] : devices_) {
    auto labels = label("executor", name);
    labels.pop_back();  // '}'
    labels += ",device=\"" + escape_label_value(device) + "\"}";
    write_sample(out, "conveyor_executor_info", labels, 1.0);
  }
  // Settable gauges.
  write_header(out, "conveyor_queue_depth", "Requests waiting in the batcher's queue.", "gauge");
  write_sample(out, "conveyor_queue_depth", {}, static_cast<double>(queue_depth_));
  write_header(out, "conveyor_running_sequences", "Sequences running on an executor.", "gauge");
  for (const auto& [name, sequences] : running_sequences_)
    write_sample(out, "conveyor_running_sequences", label("executor", name),
                 static_cast<double>(sequences));
  return out;
}

std::string metrics_registry::json_snapshot() const {
  nlohmann::json requests_json = nlohmann::json::object();
  for (auto x : all_outcomes) requests_json[to_string(x)] = requests(x);
  requests_json["total"] = requests_total();
  nlohmann::json reasons_json = nlohmann::json::object();
  for (auto x : all_finish_reasons) reasons_json[to_string(x)] = finished(x);
  nlohmann::json step_json = nlohmann::json::object();
  for (auto x : all_step_kinds) step_json[to_string(x)] = json_histogram(step_time(x));
  nlohmann::json running_json = nlohmann::json::object();
  for (const auto& [name, sequences] : running_sequences_) running_json[name] = sequences;
  nlohmann::json busy_json = nlohmann::json::object();
  for (const auto& [name, busy] : busy_) busy_json[name] = busy_ratio(name);
  nlohmann::json executors_json = nlohmann::json::object();
  for (const auto& name : executors()) {
    auto device = executor_device(name);
    executors_json[name] = {
        {"device", device.empty() ? nlohmann::json(nullptr) : nlohmann::json(device)},
        {"steps", executor_steps(name)}};
  }
  nlohmann::json result = {
      {"requests", requests_json},
      {"finish_reasons", reasons_json},
      {"tokens",
       {{"prompt", prompt_tokens_total_},
        {"generation", generation_tokens_total_},
        {"per_second", tokens_per_second()}}},
      {"histograms",
       {{"queue_time_seconds", json_histogram(queue_time_)},
        {"time_to_first_token_seconds", json_histogram(time_to_first_token_)},
        {"inter_token_latency_seconds", json_histogram(inter_token_latency_)},
        {"time_per_output_token_seconds", json_histogram(time_per_output_token_)},
        {"e2e_latency_seconds", json_histogram(e2e_latency_)},
        {"request_prompt_tokens", json_histogram(request_prompt_tokens_)},
        {"request_output_tokens", json_histogram(request_output_tokens_)},
        {"batch_size", json_histogram(batch_size_)},
        {"padding_fraction", json_histogram(padding_fraction_)},
        {"step_time_seconds", step_json}}},
      {"gauges",
       {{"queue_depth", queue_depth_},
        {"running_sequences", running_json},
        {"executor_busy_ratio", busy_json}}},
      {"executors", executors_json},
  };
  return result.dump();
}

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
  return x;
}

std::string metrics_registry::summary_line() const {
  auto x = summarize();
  std::string out = "requests finished=" + std::to_string(x.finished);
  out += " cancelled=" + std::to_string(x.cancelled);
  out += " expired=" + std::to_string(x.expired);
  out += " rejected=" + std::to_string(x.rejected);
  out += " failed=" + std::to_string(x.failed);
  out += " | queue p50=" + format_seconds(x.queue_time_p50);
  out += " p99=" + format_seconds(x.queue_time_p99);
  out += " | ttft p50=" + format_seconds(x.ttft_p50);
  out += " p99=" + format_seconds(x.ttft_p99);
  out += " | itl mean=" + format_seconds(x.itl_mean);
  out += " | tpot p50=" + format_seconds(x.tpot_p50);
  out += " | e2e p50=" + format_seconds(x.e2e_p50);
  out += " p99=" + format_seconds(x.e2e_p99);
  out += " | batch mean=" + format_number("%.1f", x.batch_size_mean);
  out += " pad=" + format_number("%.1f%%", x.padding_fraction_mean * 100);
  out += " | tok/s=" + format_number("%.1f", x.tokens_per_second);
  return out;
}

}  // namespace conveyor::pipeline
