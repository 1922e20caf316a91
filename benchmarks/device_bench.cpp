// The decode step of the torch-operation network on one device (CONVEYOR_DEVICE, default
// cuda:0): step time and tokens/s at batch 1, 16, 64 and 256 for synthetic:s42m and
// synthetic:s1b (TinyLlama 1.1B's shape), in f32 and bf16, with CUDA graphs on and off, and the
// device memory that the model holds (weights, KV cache, workspace). scripts/gpu-check.sh runs
// it on a GPU and turns its JSON into the table of docs/benchmarks.md. On the CPU it runs too
// (CONVEYOR_DEVICE=cpu), slowly, for checking the program itself.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include <benchmark/benchmark.h>

#include "model/causal_lm.hpp"
#include "model/device_support.hpp"
#include "model/slot_tables.hpp"

using namespace conveyor::model;

namespace {

constexpr int32_t prompt_length = 32;
constexpr int32_t context = 512;
const char* const models[] = {"s42m", "s1b"};

std::string device_name() {
  const char* device = std::getenv("CONVEYOR_DEVICE");
  return device != nullptr && *device != 0 ? device : "cuda:0";
}

// Random weights are made once per shape and shared by every case of that shape.
const llama_weights& weights_of(const std::string& name) {
  static std::map<std::string, llama_weights> made;
  auto it = made.find(name);
  if (it == made.end()) {
    auto w = make_synthetic_weights(name, 1);
    if (!w) {
      std::fprintf(stderr, "device_bench: %s\n", conveyor::message_of(w.error()).c_str());
      std::exit(1);
    }
    it = made.emplace(name, std::move(*w)).first;
  }
  return it->second;
}

// Arguments: model (0 s42m, 1 s1b), batch, dtype (0 f32, 1 bf16), graphs (0 off, 1 on).
void bm_decode(benchmark::State& state) {
  const std::string name = models[state.range(0)];
  const int32_t batch = int32_t(state.range(1));
  const auto& weights = weights_of(name);
  runtime_options opt;
  opt.slots = batch;
  opt.context = context;
  opt.max_batched_tokens = std::max(batch * prompt_length, context);
  opt.device = device_name();
  opt.network = llama_network::torch_ops;
  opt.dtype = state.range(2) == 1 ? compute_dtype::bf16 : compute_dtype::f32;
  opt.cuda_graphs = state.range(3) == 1;
  const auto device = parse_device(opt.device);
  release_cached_memory(device);
  const int64_t before = device_memory_allocated(device);
  auto model = make_llama(weights, opt);
  if (!model) {
    state.SkipWithError(conveyor::message_of(model.error()).c_str());
    return;
  }
  const int64_t held = before < 0 ? -1 : device_memory_allocated(device) - before;
  std::vector<int32_t> prompt(prompt_length, 300);
  std::vector<prefill_item> items;
  const slot_tables tables(**model);
  for (int32_t b = 0; b < batch; ++b)
    items.push_back({tables[b], 0, prompt.data(), prompt_length, -1});
  (*model)->prefill(items);
  std::vector<decode_item> step;
  for (int32_t b = 0; b < batch; ++b) step.push_back({tables[b], prompt_length, 301});
  // Positions walk from 32 to 160 and back, so attention spans stay typical. decode() returns
  // the logits on the host: each step is complete when it returns. A few untimed steps first:
  // the first ones pay for the device's libraries starting and, with graphs, the capture.
  int32_t pos = prompt_length;
  for (int32_t i = 0; i < 3; ++i, ++pos) {
    for (auto& d : step) d.position = pos;
    (*model)->decode(step);
  }
  for (auto _ : state) {
    for (auto& d : step) d.position = pos;
    benchmark::DoNotOptimize((*model)->decode(step).data);
    if (++pos >= 160) pos = prompt_length;
  }
  state.counters["tokens/s"] =
      benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["device_MiB"] = held < 0 ? -1.0 : double(held) / (1 << 20);
  state.counters["kv_MiB"] = double((*model)->kv_cache_bytes()) / (1 << 20);
  state.counters["params_M"] = double(weights.shape.parameter_count()) / 1e6;
  state.SetLabel(name + " " + dtype_name(opt.dtype) + (opt.cuda_graphs ? " graphs" : " eager"));
}

void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"model", "batch", "bf16", "graphs"});
  for (int64_t m : {0, 1})
    for (int64_t dtype : {0, 1})
      for (int64_t graphs : {0, 1})
        for (int64_t batch : {1, 16, 64, 256}) b->Args({m, batch, dtype, graphs});
  b->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(bm_decode)->Apply(args);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::fprintf(stderr, "device_bench on %s (graphs built: %s)\n", device_name().c_str(),
               cuda_graphs_built() ? "yes" : "no");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
