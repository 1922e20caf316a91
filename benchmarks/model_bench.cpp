// Prefill and decode step time against batch size, beside the time the arithmetic alone needs
// (the step's FLOPs over this machine's measured matmul rate).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include "common/install_dirs.hpp"
#include "model/causal_lm.hpp"

using namespace conveyor::model;

namespace {

constexpr int32_t prompt_length = 32;

// FLOP/s of a float32 GEMM of [64 x 512] x [512 x 1376] on this machine, measured once.
double matmul_rate() {
  static const double rate = [] {
    auto a = at::randn({64, 512});
    auto b = at::randn({512, 1376});
    auto c = at::empty({64, 1376});
    for (int i = 0; i < 20; ++i) at::mm_out(c, a, b);
    const int reps = 400;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) at::mm_out(c, a, b);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return 2.0 * 64 * 512 * 1376 * reps / s;
  }();
  return rate;
}

// FLOPs of `tokens` tokens through the network, each attending to `span` positions.
double step_flops(const llama_shape& s, double tokens, double span) {
  const double d = s.dim, h = s.hidden_dim, kv = s.kv_dim(), L = s.n_layers;
  const double weights = L * (d * d + 2 * kv * d + d * d + 3 * h * d);
  const double attention = L * 2 * s.n_heads * span * s.head_size();
  return 2 * tokens * (weights + attention) + 2 * tokens * s.vocab_size * d;
}

std::string spec_of(int64_t which) {
  return which == 0 ? resolve_path(std::string{conveyor::default_model_path})
                    : std::string{"synthetic:s15m"};
}

std::unique_ptr<causal_lm> load(int64_t which, int32_t slots) {
  runtime_options opt;
  opt.slots = slots;
  opt.max_batched_tokens = slots * prompt_length;
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
  std::vector<prefill_item> items;
  for (int32_t b = 0; b < batch; ++b) {
    for (auto& t : prompts[b]) t = 3 + int32_t(rng() % 500);
    items.push_back({b, 0, prompts[b].data(), prompt_length, -1});
  }
  for (auto _ : state) benchmark::DoNotOptimize(model->prefill(items).data);
  const double tokens = double(batch) * prompt_length;
  const double flops = step_flops(model->shape(), tokens, prompt_length / 2.0);
  state.counters["tokens/s"] =
      benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["arith_us"] = flops / matmul_rate() * 1e6;
}

void bm_decode(benchmark::State& state) {
  const int32_t batch = int32_t(state.range(1));
  auto model = load(state.range(0), batch);
  std::vector<int32_t> prompt(prompt_length, 300);
  std::vector<prefill_item> items;
  for (int32_t b = 0; b < batch; ++b) items.push_back({b, 0, prompt.data(), prompt_length, -1});
  model->prefill(items);
  std::vector<decode_item> step;
  for (int32_t b = 0; b < batch; ++b) step.push_back({b, prompt_length, 301});
  // Positions walk from 32 to 160 and back, so attention spans stay typical.
  int32_t pos = prompt_length;
  for (auto _ : state) {
    for (auto& d : step) d.position = pos;
    benchmark::DoNotOptimize(model->decode(step).data);
    if (++pos >= 160) pos = prompt_length;
  }
  const double flops = step_flops(model->shape(), batch, 96);
  state.counters["tokens/s"] =
      benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["arith_us"] = flops / matmul_rate() * 1e6;
}

void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"model", "batch"});
  for (int64_t m : {0, 1})
    for (int64_t batch : {1, 4, 16, 64}) b->Args({m, batch});
  b->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK(bm_prefill)->Apply(args);
BENCHMARK(bm_decode)->Apply(args);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::fprintf(stderr,
               "%s\nmatmul rate: %.1f GFLOP/s (model 0 = stories260K, 1 = synthetic:s15m)\n",
               compute_backend_description().c_str(), matmul_rate() / 1e9);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
