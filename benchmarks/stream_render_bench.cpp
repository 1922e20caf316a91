// One stream event of a token, rendered as the server once did (an nlohmann::json
// object per token, dumped, then "data: " + payload + "\n\n" as a new string) and as it does now
// (completion_task writing straight into the connection's reused stream buffer).
#include <benchmark/benchmark.h>

#include <string>

#include <nlohmann/json.hpp>

#include "server/completion_task.hpp"
#include "server/openai.hpp"

namespace {

using json = nlohmann::json;
using conveyor::server::api_kind;
using conveyor::server::completion_meta;

completion_meta meta() {
  return {"cmpl-0123456789abcdef01234567", 1764676800, "stories260K", api_kind::completions};
}

// The earlier renderer, kept here as the baseline.
std::string nlohmann_event(const completion_meta& m, std::size_t index, const std::string& text) {
  json obj{{"id", m.id}, {"object", "text_completion"}, {"created", m.created}, {"model", m.model}};
  json choice{{"text", text}, {"index", index}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  obj["choices"] = json::array({std::move(choice)});
  return "data: " + obj.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

void BM_event_nlohmann_json(benchmark::State& state) {
  const auto m = meta();
  const std::string text = " little";
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto event = nlohmann_event(m, 0, text);
    bytes += event.size();
    benchmark::DoNotOptimize(event);
  }
  state.SetBytesProcessed(int64_t(bytes));
}
BENCHMARK(BM_event_nlohmann_json);

void BM_event_direct_into_the_buffer(benchmark::State& state) {
  conveyor::server::detail::completion_task task{1, meta(), true, false, 1};
  const std::string text = " little";
  std::string buffer;
  std::size_t bytes = 0;
  for (auto _ : state) {
    conveyor::server::completion_step step;
    step.text = text;
    task.on_step(0, std::move(step), buffer);
    bytes += buffer.size();
    benchmark::DoNotOptimize(buffer.data());
    buffer.clear();  // the write took it; the capacity stays
  }
  state.SetBytesProcessed(int64_t(bytes));
}
BENCHMARK(BM_event_direct_into_the_buffer);

}  // namespace

BENCHMARK_MAIN();
