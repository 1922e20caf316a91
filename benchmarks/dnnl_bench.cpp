// oneDNN's matmul primitive with weights reordered once into the format the primitive chooses,
// on the products of an s15m layer: the comparison for the packed kernel of kernels/packed_matmul
// (conveyor_model_bench's bm_matmul runs the same shapes through OpenBLAS and the packed kernel).
// Built only where Debian's libdnnl-dev is installed (not a dependency of Conveyor itself).
#include <cstdint>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.hpp>

namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// kernel 0: f32 source and weights; 1: bf16 source and weights (the source converted from f32
// on every call, as activations arrive in f32), f32 result.
void bm_dnnl_matmul(benchmark::State& state) {
  const int64_t m = state.range(0), in = state.range(1), out = state.range(2);
  const bool bf16 = state.range(3) != 0;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> x(size_t(m * in)), w(size_t(in * out)), y(size_t(m * out));
  for (auto& v : x) v = normal(rng);
  for (auto& v : w) v = normal(rng);
  const dt low = bf16 ? dt::bf16 : dt::f32;
  dnnl::memory::desc x_f32({m, in}, dt::f32, tag::ab), w_f32({in, out}, dt::f32, tag::ab);
  dnnl::memory::desc x_any({m, in}, low, tag::ab), w_any({in, out}, low, tag::any);
  dnnl::memory::desc y_desc({m, out}, dt::f32, tag::ab);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(x_any, w_any, y_desc), engine);  // 2.x API
  // The weights once, into the primitive's own format.
  dnnl::memory w_user(w_f32, engine, w.data()), w_packed(pd.weights_desc(), engine);
  dnnl::reorder(w_user, w_packed).execute(stream, w_user, w_packed);
  dnnl::memory x_user(x_f32, engine, x.data()), x_low(pd.src_desc(), engine);
  dnnl::memory y_mem(y_desc, engine, y.data());
  dnnl::reorder to_low(x_user, x_low);
  dnnl::matmul mm(pd);
  for (auto _ : state) {
    if (bf16) to_low.execute(stream, x_user, x_low);
    mm.execute(stream, {{DNNL_ARG_SRC, bf16 ? x_low : x_user},
                        {DNNL_ARG_WEIGHTS, w_packed},
                        {DNNL_ARG_DST, y_mem}});
    stream.wait();
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(m * in * out) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(bf16 ? "onednn bf16" : "onednn f32");
}

void matmul_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "in", "out", "bf16"});
  for (int64_t m : {1, 16, 64})
    for (auto [in, out] : {std::pair<int64_t, int64_t>{288, 864}, {288, 1536}, {768, 288}})
      for (int64_t bf16 : {0, 1}) b->Args({m, in, out, bf16});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

}  // namespace

BENCHMARK(bm_dnnl_matmul)->Apply(matmul_args);
BENCHMARK_MAIN();
