// Prefill and decode step time against batch size, beside two floors measured on this machine:
// the time the arithmetic alone needs (the step's FLOPs over OpenBLAS's float32 GEMM rate) and
// the time to read the weights once (their bytes over the memory read bandwidth). And the packed
// weight kernel against OpenBLAS on the products of an s15m layer.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include "common/install_dirs.hpp"
#include "kernels/blas_kernels.hpp"
#include "kernels/cache_attention.hpp"
#include "kernels/packed_matmul.hpp"
#include "kernels/work_pool.hpp"
#include "model/causal_lm.hpp"
#include "model/slot_tables.hpp"

using namespace conveyor::model;
using namespace conveyor::kernels;

namespace {

constexpr int32_t prompt_length = 32;

// FLOP/s of a float32 GEMM of [64 x 512] x [512 x 1376] on this machine, measured once: the best
// of five passes, as the read bandwidth, since a floor is what the machine can do (one pass of
// 400 varied from 110 to 143 GFLOP/s between runs on one Intel Xeon).
double matmul_rate() {
  static const double rate = [] {
    auto a = at::randn({64, 512});
    auto b = at::randn({512, 1376});
    auto c = at::empty({64, 1376});
    for (int i = 0; i < 20; ++i) at::mm_out(c, a, b);
    const int reps = 100;
    double best = 0;
    for (int pass = 0; pass < 5; ++pass) {
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) at::mm_out(c, a, b);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      best = std::max(best, 2.0 * 64 * 512 * 1376 * reps / s);
    }
    return best;
  }();
  return rate;
}

// Bytes/s read from memory by the compute pool's threads, each summing pieces of a 512 MiB buffer
// (far larger than the caches), best of five passes.
double read_bandwidth() {
  static const double rate = [] {
    const int64_t n = int64_t{512} << 20 >> 2;
    std::vector<float> buffer(size_t(n), 1.0f);
    double best = 0;
    for (int pass = 0; pass < 5; ++pass) {
      std::vector<float> sums(256, 0.0f);
      auto start = std::chrono::steady_clock::now();
      parallel_for(n, n / 64, [&](int64_t begin, int64_t end) {
        float lanes[16] = {};
        for (int64_t i = begin; i + 16 <= end; i += 16)
          for (int l = 0; l < 16; ++l) lanes[l] += buffer[size_t(i + l)];
        float total = 0;
        for (float v : lanes) total += v;
        sums[size_t(begin / (n / 64))] += total;
      });
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      benchmark::DoNotOptimize(sums.data());
      best = std::max(best, double(n) * sizeof(float) / s);
    }
    return best;
  }();
  return rate;
}

// Bytes of the weights one decode step reads: every matrix of every layer and the classifier
// (the embedding rows of a step are few).
double weight_bytes(const llama_shape& s, bool bf16) {
  const double d = s.dim, h = s.hidden_dim, kv = s.kv_dim(), q = s.q_dim(), L = s.n_layers;
  const double params = L * (d * (q + 2 * kv) + q * d + 3 * h * d) + d * s.vocab_size;
  return params * (bf16 ? 2 : 4);
}

// FLOPs of `tokens` tokens through the network, each attending to `span` positions.
double step_flops(const llama_shape& s, double tokens, double span) {
  const double d = s.dim, h = s.hidden_dim, kv = s.kv_dim(), L = s.n_layers;
  const double weights = L * (d * d + 2 * kv * d + d * d + 3 * h * d);
  const double attention = L * 2 * s.n_heads * span * s.head_size();
  return 2 * tokens * (weights + attention) + 2 * tokens * s.vocab_size * d;
}

// 0: stories260K, 1: synthetic:s15m, 2: synthetic:s42m.
std::string spec_of(int64_t which) {
  if (which == 0) return resolve_path(std::string{conveyor::default_model_path});
  return which == 1 ? std::string{"synthetic:s15m"} : std::string{"synthetic:s42m"};
}

// The model `which` with `slots` slots; weights in bf16 with `bf16` (and the products' inputs too
// with `bf16_inputs`), the KV cache in bf16 with `kv_bf16` (else f32, whatever the weights).
std::unique_ptr<causal_lm> load(int64_t which, int32_t slots, bool bf16 = false,
                                bool kv_bf16 = false, bool bf16_inputs = false) {
  runtime_options opt;
  opt.slots = slots;
  opt.max_batched_tokens = slots * prompt_length;
  if (bf16) opt.dtype = compute_dtype::bf16;
  opt.bf16_inputs = bf16_inputs;
  opt.kv_dtype = kv_bf16 ? compute_dtype::bf16 : compute_dtype::f32;
  // CONVEYOR_DEVICE=cuda:0 runs the model on a GPU (scripts/gpu-check.sh does).
  if (const char* device = std::getenv("CONVEYOR_DEVICE"); device != nullptr && *device != 0)
    opt.device = device;
  auto m = load_model(spec_of(which), opt);
  if (!m) {
    std::fprintf(stderr, "model_bench: %s\n", conveyor::message_of(m.error()).c_str());
    std::abort();
  }
  return std::move(*m);
}

void bm_prefill(benchmark::State& state) {
  const int32_t batch = int32_t(state.range(1));
  auto model = load(state.range(0), batch);
  std::mt19937 rng(1);
  std::vector<std::vector<int32_t>> prompts(size_t(batch),
                                            std::vector<int32_t>(size_t{prompt_length}));
  const slot_tables tables(*model);
  std::vector<prefill_item> items;
  for (int32_t b = 0; b < batch; ++b) {
    for (auto& t : prompts[b]) t = 3 + int32_t(rng() % 500);
    items.push_back({tables[b], 0, prompts[b].data(), prompt_length, -1});
  }
  for (auto _ : state) benchmark::DoNotOptimize(model->prefill(items).data);
  const double tokens = double(batch) * prompt_length;
  const double flops = step_flops(model->shape(), tokens, prompt_length / 2.0);
  state.counters["tokens/s"] =
      benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["arith_us"] = flops / matmul_rate() * 1e6;
}

// One prompt of `length` tokens of s42m prefilled whole: where attention over the prompt's own
// positions is a large part of the pass.
void bm_prefill_long(benchmark::State& state) {
  const auto length = int32_t(state.range(0));
  auto model = load(2, 1);
  std::mt19937 rng(1);
  std::vector<int32_t> prompt(static_cast<size_t>(length));
  for (auto& t : prompt) t = 3 + int32_t(rng() % 500);
  const slot_tables tables(*model);
  const std::vector<prefill_item> items{{tables[0], 0, prompt.data(), length, -1}};
  for (auto _ : state) benchmark::DoNotOptimize(model->prefill(items).data);
  state.counters["tokens/s"] =
      benchmark::Counter(double(length), benchmark::Counter::kIsIterationInvariantRate);
}

// Prefills `batch` sequences of the same prompt_length-token prompt into slots 0..batch-1 and
// returns a decode step of one token for each, at `position`.
std::vector<decode_item> prefilled_step(causal_lm& model, const slot_tables& tables, int32_t batch,
                                        int32_t position) {
  std::vector<int32_t> prompt(prompt_length, 300);
  std::vector<prefill_item> items;
  for (int32_t b = 0; b < batch; ++b)
    items.push_back({tables[b], 0, prompt.data(), prompt_length, -1});
  model.prefill(items);
  std::vector<decode_item> step;
  for (int32_t b = 0; b < batch; ++b) step.push_back({tables[b], position, 301});
  return step;
}

void bm_decode(benchmark::State& state) {
  const int32_t batch = int32_t(state.range(1));
  const bool bf16 = state.range(2) != 0;
  auto model = load(state.range(0), batch, bf16, state.range(3) != 0, state.range(2) == 2);
  const slot_tables tables(*model);
  auto step = prefilled_step(*model, tables, batch, prompt_length);
  // Positions walk from 32 to 160 and back, so attention spans stay typical.
  int32_t pos = prompt_length;
  for (auto _ : state) {
    for (auto& d : step) d.position = pos;
    benchmark::DoNotOptimize(model->decode(step).data);
    if (++pos >= 160) pos = prompt_length;
  }
  const double flops = step_flops(model->shape(), batch, 96);
  const double arith_us = flops / matmul_rate() * 1e6;
  const double weights_us = weight_bytes(model->shape(), bf16) / read_bandwidth() * 1e6;
  state.counters["tokens/s"] =
      benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["arith_us"] = arith_us;
  state.counters["weights_us"] = weights_us;
  // The step's time over each floor: the step time is known per iteration, so the counters are
  // inverted rates of the floor (time / (iterations x floor)).
  const auto over = benchmark::Counter::Flags(benchmark::Counter::kIsIterationInvariantRate |
                                                  benchmark::Counter::kInvert);
  state.counters["x_arith"] = benchmark::Counter(arith_us * 1e-6, over);
  state.counters["x_weights"] = benchmark::Counter(weights_us * 1e-6, over);
}

// One (row, kv head) task of decode attention on one thread: `g` = 2 query heads of size `hs`
// over `span` positions of an f32 cache (stories260K's heads are 8 wide, s15m's 48, Llama's 64
// or 128), so that the kernel's own speed is seen apart from the step.
void bm_attend(benchmark::State& state) {
  const int64_t hs = state.range(0), span = state.range(1), g = 2;
  // In blocks of 16 positions, in order (a contiguous cache).
  const int64_t block_size = 16, ctx = (span + block_size - 1) / block_size * block_size;
  std::mt19937 rng{7};
  std::normal_distribution<float> normal;
  std::vector<float> q(size_t(g * hs)), keys(size_t(ctx * hs)), values(size_t(ctx * hs));
  std::vector<int32_t> table(size_t(ctx / block_size));
  for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i);
  const cache_blocks<float> cache{keys.data(), values.data(), block_size * hs, table.data(),
                                  block_size};
  for (auto* v : {&q, &keys, &values})
    for (auto& x : *v) x = normal(rng);
  std::vector<float> scores(size_t(g * ctx)), out(size_t(g * hs));
  const float scale = 1.0f / std::sqrt(float(hs));
  for (auto _ : state) {
    attend_cached(hs, q.data(), g, cache, ctx, span, scale, scores.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["positions/s"] =
      benchmark::Counter(double(span), benchmark::Counter::kIsIterationInvariantRate);
}

// The decode step of s15m with every sequence at one position: the step reads
// 2 x layers x batch x kv_dim x (position + 1) numbers of cache (f32, or bf16 with kv_bf16), so
// the difference between two positions gives the bandwidth attention reads the cache at (batch
// 64), or what a long sequence alone adds to its step (batch 1).
void bm_decode_at(benchmark::State& state) {
  const int32_t batch = int32_t(state.range(0)), position = int32_t(state.range(1));
  const bool kv_bf16 = state.range(2) != 0;
  auto model = load(1, batch, false, kv_bf16);
  const slot_tables tables(*model);
  const auto step = prefilled_step(*model, tables, batch, position);
  for (auto _ : state) benchmark::DoNotOptimize(model->decode(step).data);
  const auto& s = model->shape();
  state.counters["cache_MB"] =
      2.0 * s.n_layers * batch * s.kv_dim() * (position + 1) * (kv_bf16 ? 2 : 4) / 1e6;
}

// The decode step of s15m at batch 1 after an idle gap of `gap_us` (not timed), as under a light
// load, where steps follow gaps: one longer than the compute pool's polling window finds its
// workers asleep, and the cores idle meanwhile.
void bm_decode_after_gap(benchmark::State& state) {
  const auto gap = std::chrono::microseconds(state.range(0));
  auto model = load(1, 1, false, false);
  const slot_tables tables(*model);
  auto step = prefilled_step(*model, tables, 1, prompt_length);
  int32_t pos = prompt_length;
  for (auto _ : state) {
    state.PauseTiming();
    std::this_thread::sleep_for(gap);
    step[0].position = pos;
    if (++pos >= 160) pos = prompt_length;
    state.ResumeTiming();
    benchmark::DoNotOptimize(model->decode(step).data);
  }
}

// A light load's rhythm: runs of `steps` decode steps of s15m at batch 1 back to back (one
// request's tokens), each run after an idle gap of `gap_ms` (between requests); the time is the
// runs' alone, per step. Against gap 0 it shows what idle gaps cost the steps that follow them.
void bm_decode_in_runs(benchmark::State& state) {
  const int32_t steps = int32_t(state.range(0));
  const auto gap = std::chrono::milliseconds(state.range(1));
  auto model = load(1, 1, false, false);
  const slot_tables tables(*model);
  auto step = prefilled_step(*model, tables, 1, prompt_length);
  for (auto _ : state) {
    std::this_thread::sleep_for(gap);
    const auto start = std::chrono::steady_clock::now();
    for (int32_t i = 0; i < steps; ++i) {
      step[0].position = prompt_length + i;
      benchmark::DoNotOptimize(model->decode(step).data);
    }
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.counters["step_us"] = benchmark::Counter(
      double(steps) * 1e-6, benchmark::Counter::kIsIterationInvariantRate |
                                 benchmark::Counter::kInvert);
}

// One matrix product of an s15m layer ([in x out]) for m rows: OpenBLAS through at::mm (which
// packs the weights on every call), and the packed kernel in each weight format (bf16_dot: with
// AVX-512 BF16's instruction where the processor has it).
void bm_matmul(benchmark::State& state) {
  const int64_t m = state.range(0), in = state.range(1), out = state.range(2);
  // 0 OpenBLAS, 1 packed f32, 2 packed bf16, 3 packed bf16_dot
  const int64_t kernel = state.range(3);
  static const weight_format formats[] = {weight_format::f32, weight_format::f32,
                                          weight_format::bf16, weight_format::bf16_dot};
  static const char* const labels[] = {"openblas", "packed f32", "packed bf16",
                                       "packed bf16_dot"};
  auto x = at::randn({m, in});
  auto w = at::randn({in, out});
  auto y = at::empty({m, out});
  packed_matrix packed(w.data_ptr<float>(), in, out, out, formats[kernel]);
  for (auto _ : state) {
    if (kernel == 0)
      at::mm_out(y, x, w);
    else
      packed.multiply(x.data_ptr<float>(), in, m, y.data_ptr<float>(), out);
    benchmark::DoNotOptimize(y.data_ptr<float>());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(m * in * out) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(kernel == 3 && !packed_matrix::bf16_dot_instruction()
                     ? "packed bf16_dot (vector code)"
                     : labels[kernel]);
}

void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"model", "batch"});
  for (int64_t m : {0, 1})
    for (int64_t batch : {1, 4, 16, 64}) b->Args({m, batch});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

// bf16: the weights in bf16 (2: and the products' inputs, model.bf16_inputs); kv_bf16: the KV
// cache in bf16 (each independent of the other).
void decode_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"model", "batch", "bf16", "kv_bf16"});
  for (int64_t m : {0, 1})
    for (int64_t batch : {1, 4, 16, 64}) b->Args({m, batch, 0, 0});
  for (auto [bf16, kv_bf16] : {std::pair<int64_t, int64_t>{1, 0}, {0, 1}, {1, 1}, {2, 0}, {2, 1}})
    for (int64_t batch : {1, 4, 16, 64}) b->Args({1, batch, bf16, kv_bf16});
  for (int64_t batch : {16, 64}) b->Args({2, batch, 0, 0});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

void matmul_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "in", "out", "kernel"});
  for (int64_t m : {1, 16, 64})
    for (auto [in, out] : {std::pair<int64_t, int64_t>{288, 864}, {288, 1536}, {768, 288}})
      for (int64_t kernel : {0, 1, 2, 3}) b->Args({m, in, out, kernel});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

}  // namespace

BENCHMARK(bm_prefill)->Apply(args);
BENCHMARK(bm_decode)->Apply(decode_args);
BENCHMARK(bm_prefill_long)
    ->ArgName("length")
    ->Arg(128)
    ->Arg(480)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_matmul)->Apply(matmul_args);
BENCHMARK(bm_decode_after_gap)
    ->ArgName("gap_us")
    ->Arg(0)
    ->Arg(100)
    ->Arg(1000)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(bm_decode_in_runs)
    ->ArgNames({"steps", "gap_ms"})
    ->ArgsProduct({{85}, {0, 20, 150}})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK(bm_attend)
    ->ArgNames({"hs", "span"})
    ->ArgsProduct({{8, 16, 48, 64, 128}, {96, 480}});
BENCHMARK(bm_decode_at)
    ->ArgNames({"batch", "position", "kv_bf16"})
    ->ArgsProduct({{1, 64}, {32, 480}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

int main(int argc, char** argv) {
  // The floors need OpenBLAS's kernels for this processor, as `conveyor` runs them.
  restart_with_fitting_blas(argv);
  benchmark::Initialize(&argc, argv);
  // Every core computes, as `conveyor serve` and `bench` do by default; CONVEYOR_THREADS=N
  // measures N threads instead.
  int32_t threads = int32_t(std::max(1u, std::thread::hardware_concurrency()));
  if (const char* t = std::getenv("CONVEYOR_THREADS"); t != nullptr && std::atoi(t) > 0)
    threads = int32_t(std::atoi(t));
  set_compute_threads(threads);
  std::fprintf(stderr,
               "%s\nmatmul rate: %.1f GFLOP/s, memory read bandwidth: %.1f GB/s "
               "(model 0 = stories260K, 1 = synthetic:s15m)\n",
               compute_backend_description().c_str(), matmul_rate() / 1e9,
               read_bandwidth() / 1e9);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
