// One stream event of a token, as the server renders it: a step's text through its
// completion_task, written straight into the connection's reused stream buffer.
#include <benchmark/benchmark.h>

#include <string>
#include <utility>

#include "server/completion_task.hpp"
#include "server/openai.hpp"

namespace {

using conveyor::server::api_kind;
using conveyor::server::completion_meta;
using conveyor::server::completion_step;

completion_meta meta() {
  return {"cmpl-0123456789abcdef01234567", 1764676800, "stories260K", api_kind::completions};
}

void BM_event_into_the_buffer(benchmark::State& state) {
  conveyor::server::detail::completion_task task{1, meta(), true, false, 1};
  const std::string text = " little";
  std::string buffer;
  std::size_t bytes = 0;
  for (auto _ : state) {
    completion_step step;
    step.text = text;
    task.on_step(0, std::move(step), buffer);
    bytes += buffer.size();
    benchmark::DoNotOptimize(buffer.data());
    buffer.clear();  // the write took it; the capacity stays
  }
  state.SetBytesProcessed(int64_t(bytes));
}
BENCHMARK(BM_event_into_the_buffer);

}  // namespace

BENCHMARK_MAIN();
