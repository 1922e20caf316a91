// The product over quantized weights (kernels/quant_matmul.hpp) on TinyLlama-1.1B's matrix
// shapes: batch 1 (a decode step: weights streamed from memory, bytes_per_second is the weights'
// read rate) and batches of 32 and 128 (prefill: GOP/s of multiply-adds, counted twice), against
// a plain read of memory on the same threads (bm_read_memory: the ceiling of batch 1); cached:1
// runs batch 1 on one matrix that stays in the cache (the kernel's speed without memory's).
// CONVEYOR_THREADS=N runs N threads (default: every core); CONVEYOR_QUANT_ISA=scalar|avx2|...
// limits the instruction set.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "kernels/quant_blocks.hpp"
#include "kernels/quant_matmul.hpp"
#include "kernels/work_pool.hpp"

using namespace conveyor::kernels;

namespace {

// Batch 1 cycles through copies of the matrix that together exceed the last-level cache, so that
// every product reads its weights from memory as a decode step does.
constexpr int64_t streamed_bytes = int64_t{512} << 20;

const quant_type types[] = {quant_type::q8_0, quant_type::q4_0, quant_type::q4_k, quant_type::q6_k};

// Blocks of random bytes with float16 scales between 1e-3 and 1e-2 (no infinities or NaNs).
std::vector<uint8_t> random_blocks(quant_type type, int64_t in, int64_t out, uint32_t seed) {
  const int64_t bb = quant_block_bytes(type), n = in / quant_block_elements(type) * out;
  std::vector<uint8_t> w(size_t(n * bb));
  std::mt19937 rng(seed);
  for (auto& b : w) b = uint8_t(rng());
  std::uniform_real_distribution<float> scale(1e-3f, 1e-2f);
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* block = &w[size_t(i * bb)];
    auto put = [&](int64_t offset) {
      const uint16_t h = to_f16(scale(rng));
      std::memcpy(block + offset, &h, sizeof(h));
    };
    if (type == quant_type::q6_k) {
      put(208);
    } else {
      put(0);
      if (type == quant_type::q4_k) put(2);
    }
  }
  return w;
}

void bm_quant_matmul(benchmark::State& state) {
  const quant_type type = types[state.range(0)];
  const int64_t m = state.range(1), in = state.range(2), out = state.range(3);
  const bool cached = state.range(4) != 0;
  const auto blocks = random_blocks(type, in, out, 1);
  const int64_t bytes = quantized_matrix::packed_bytes(type, in, out);
  const int64_t copies = m == 1 && !cached ? std::max<int64_t>(1, streamed_bytes / bytes) : 1;
  std::vector<quantized_matrix> matrices;
  for (int64_t c = 0; c < copies; ++c) matrices.emplace_back(type, blocks.data(), in, out);
  std::vector<float> x(size_t(m * in)), y(size_t(m * out));
  std::mt19937 rng(2);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (auto& v : x) v = n(rng);
  int64_t next = 0;
  for (auto _ : state) {
    matrices[size_t(next)].multiply(x.data(), in, m, y.data(), out);
    next = (next + 1) % copies;
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["GOP/s"] = benchmark::Counter(double(2 * m * in * out) * state.iterations() / 1e9,
                                               benchmark::Counter::kIsRate);
  state.SetLabel(std::string(quant_type_name(type)) + " " +
                 quant_isa_name(quantized_matrix::isa()));
}

void quant_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "m", "in", "out", "cached"});
  for (int64_t m : {1, 32, 128})
    for (int64_t t = 0; t < 4; ++t)
      for (auto [in, out] : {std::pair<int64_t, int64_t>{2048, 2048}, {2048, 5632}, {5632, 2048}})
        b->Args({t, m, in, out, 0});
  // Batch 1 on one matrix that stays in the cache: the kernel's own speed, without memory's.
  for (int64_t t = 0; t < 4; ++t) b->Args({t, 1, 2048, 2048, 1});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

// Sums 512 MiB of floats on the compute pool's threads: the rate a streaming kernel can reach.
void bm_read_memory(benchmark::State& state) {
  const int64_t n = streamed_bytes / int64_t(sizeof(float));
  std::vector<float> buffer(size_t(n), 1.0f);
  const int64_t pieces = 64;
  std::vector<float> sums(size_t(pieces), 0.0f);
  for (auto _ : state) {
    parallel_for(n, n / pieces, [&](int64_t begin, int64_t end) {
      float lanes[16] = {};
      for (int64_t i = begin; i + 16 <= end; i += 16)
        for (int l = 0; l < 16; ++l) lanes[l] += buffer[size_t(i + l)];
      float total = 0;
      for (float v : lanes) total += v;
      sums[size_t(begin / (n / pieces))] += total;
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(state.iterations() * streamed_bytes);
}

}  // namespace

BENCHMARK(bm_quant_matmul)->Apply(quant_args);
BENCHMARK(bm_read_memory)->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  int32_t threads = int32_t(std::max(1u, std::thread::hardware_concurrency()));
  if (const char* t = std::getenv("CONVEYOR_THREADS"); t != nullptr && std::atoi(t) > 0)
    threads = int32_t(std::atoi(t));
  compute_pool().resize(threads);
  if (const char* isa = std::getenv("CONVEYOR_QUANT_ISA"); isa != nullptr)
    for (uint8_t i = 0; i <= uint8_t(quant_isa::avx512_vnni); ++i)
      if (std::string(isa) == quant_isa_name(quant_isa(i)))
        quantized_matrix::limit_isa(quant_isa(i));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
