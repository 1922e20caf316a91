// What structured outputs cost: the token mask of each decoding step (`update_mask` then
// `apply_mask`, timed token by token along a valid output) and the compilation of a format, cold
// and from the cache, on the vocabularies of Llama 3 (128,256 tokens; the directory
// $CONVEYOR_LLAMA3_TOKENIZER, which scripts/fetch-llama3-tokenizer.sh makes), GPT-2 (50,257)
// and stories260K (512).
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/output_formats.hpp"
#include "bench/stats.hpp"
#include "grammar/grammar_compiler.hpp"
#include "grammar/token_matcher.hpp"
#include "tokenizers/tokenizer.hpp"

using namespace conveyor;

namespace {

const std::string source_dir = CONVEYOR_SOURCE_DIR;

// -- vocabularies --------------------------------------------------------------------------------

struct vocabulary {
  const char* name;
  /// Relative to the source directory, or the environment variable naming the path.
  const char* path;
  bool from_environment = false;
};

/// Indexed by the benchmarks' first argument.
const vocabulary vocabularies[] = {
    {"llama3", "CONVEYOR_LLAMA3_TOKENIZER", true},
    {"gpt2", "tests/fixtures/tokenizers/gpt2/tokenizer.json"},
    {"stories260K", "models/stories260K/tok512.model"},
};

/// The tokenizer of vocabulary `index`, loaded once, or why it cannot be.
conveyor::expected<std::shared_ptr<const tokenizers::tokenizer>> tokenizer_of(int64_t index) {
  static std::optional<conveyor::expected<std::shared_ptr<const tokenizers::tokenizer>>>
      loaded[std::size(vocabularies)];
  auto& tok = loaded[index];
  if (!tok) {
    const auto& v = vocabularies[index];
    const char* env = v.from_environment ? std::getenv(v.path) : nullptr;
    if (v.from_environment && !env)
      tok = make_error(ec::bad_config, std::string{"set "} + v.path +
                                           " to the tokenizer's directory "
                                           "(scripts/fetch-llama3-tokenizer.sh makes one)");
    else
      tok = tokenizers::load_tokenizer(env ? std::string{env} : source_dir + "/" + v.path);
  }
  return *tok;
}

// -- formats -------------------------------------------------------------------------------------

/// A format and an output that fits it, in the form the format's grammar generates (JSON as
/// json.dumps writes it: ", " and ": " between items, no other whitespace).
struct format {
  const char* name;
  sampling::structured_output::kind type;
  std::string spec;
  std::string output;
};

/// Indexed by the benchmarks' second argument.
const format formats[] = {
    {"json_schema", sampling::structured_output::kind::json_schema, bench::bench_json_schema(),
     R"({"age": 7, "color": "green", "height": 1.25, "member": true, "name": "Lily Brown", )"
     R"("tags": ["park", "little dog", "red ball", "sunny day"]})"},
    {"regex", sampling::structured_output::kind::regex,
     R"((Lily|Tom|Ben|Sue) is [0-9]{1,2} years old and likes [a-z]+( and [a-z]+)*\.)",
     "Tom is 7 years old and likes dogs and cats and balls and cake."},
    // What response_format {"type": "json_object"} compiles.
    {"json_object", sampling::structured_output::kind::json_schema, R"({"type": "object"})",
     R"({"title": "A day at the park", "pages": 12, "characters": [{"name": "Lily", "age": 7}, )"
     R"({"name": "Tom", "age": 8}], "happy": true, "moral": "share your toys"})"},
};

sampling::structured_output constraint_of(const format& f) {
  sampling::structured_output c;
  c.type = f.type;
  c.text = f.spec;
  c.field = "response_format";
  return c;
}

std::string label_of(benchmark::State& state) {
  return std::string{vocabularies[state.range(0)].name} + " " + formats[state.range(1)].name;
}

/// The tokens of an output, and whether the tokenizer's own encoding gave them.
struct output_tokens {
  std::vector<int32_t> ids;
  bool encoded = false;
};

/// The tokens of `text` as the tokenizer encodes it, when their bytes spell `text` exactly
/// (SentencePiece's leading dummy space dropped); otherwise the longest tokens the grammar allows
/// that spell it, from left to right. No ids when `text` does not fit the grammar.
output_tokens tokens_of(const tokenizers::tokenizer& tok,
                        std::shared_ptr<const grammar::compiled_grammar> compiled,
                        const std::string& text) {
  auto spelled = [&](const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += tok.token_bytes(id);
    return s;
  };
  if (auto ids = tok.encode(text, false)) {
    if (!ids->empty() && tok.token_bytes(ids->front()) == " " && spelled(*ids) == " " + text)
      ids->erase(ids->begin());
    if (spelled(*ids) == text) return {*ids, true};
  }
  grammar::token_matcher m{std::move(compiled), {tok.eos_id()}};
  output_tokens out;
  for (std::size_t at = 0; at < text.size();) {
    m.update_mask();
    int32_t best = -1;
    std::size_t best_size = 0;
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
      const auto bytes = tok.token_bytes(id);
      if (bytes.size() > best_size && m.allows(id) && text.compare(at, bytes.size(), bytes) == 0) {
        best = id;
        best_size = bytes.size();
      }
    }
    if (best < 0 || !m.accept(best)) return {};
    out.ids.push_back(best);
    at += best_size;
  }
  return out;
}

// -- benchmarks ----------------------------------------------------------------------------------

/// The mask of each token of a valid output: per iteration a fresh matcher walks the output,
/// timing `update_mask` + `apply_mask` on a logits row before each token (and before the end
/// token), not `accept`. The benchmark's time is the whole output's masks; the counters give
/// the mean and p99 of one token's over every iteration, in microseconds.
void bm_mask(benchmark::State& state) {
  const auto loaded = tokenizer_of(state.range(0));
  if (!loaded) return state.SkipWithError(message_of(loaded.error()).c_str());
  const auto& tok = *loaded;
  const auto& f = formats[state.range(1)];
  const int32_t vocab = tok->vocab_size();
  grammar::grammar_compiler compiler{*tok, vocab};
  auto compiled = compiler.compile(constraint_of(f));
  if (!compiled) return state.SkipWithError(message_of(compiled.error()).c_str());
  const auto output = tokens_of(*tok, *compiled, f.output);
  const auto& tokens = output.ids;
  if (tokens.empty()) return state.SkipWithError("the output does not fit the format");
  // Untimed: how many tokens each mask allows.
  double allowed = 0;
  {
    grammar::token_matcher matcher{*compiled, {tok->eos_id()}};
    for (std::size_t i = 0; i <= tokens.size(); ++i) {
      matcher.update_mask();
      for (int32_t id = 0; id < vocab; ++id) allowed += matcher.allows(id) ? 1 : 0;
      if (i < tokens.size()) matcher.accept(tokens[i]);
    }
  }
  std::vector<float> row(std::size_t(vocab), 0.0f);
  std::vector<double> per_token;
  using clock = std::chrono::steady_clock;
  for (auto _ : state) {
    grammar::token_matcher matcher{*compiled, {tok->eos_id()}};
    double total = 0;
    for (std::size_t i = 0; i <= tokens.size(); ++i) {
      const auto t0 = clock::now();
      matcher.update_mask();
      matcher.apply_mask(row.data(), vocab);
      const double s = std::chrono::duration<double>(clock::now() - t0).count();
      benchmark::DoNotOptimize(row.data());
      per_token.push_back(s);
      total += s;
      if (i < tokens.size() && !matcher.accept(tokens[i]))
        return state.SkipWithError("the matcher refused a token of the output");
    }
    if (!matcher.finished()) return state.SkipWithError("the output did not finish the format");
    state.SetIterationTime(total);
  }
  const auto d = bench::describe(per_token);
  state.counters["tokens"] = double(tokens.size() + 1);
  state.counters["allowed"] = allowed / double(tokens.size() + 1);
  state.counters["vocab"] = vocab;
  state.counters["mean_us"] = d.mean * 1e6;
  state.counters["p50_us"] = d.p50 * 1e6;
  state.counters["p99_us"] = d.p99 * 1e6;
  state.SetLabel(label_of(state) + (output.encoded ? "" : " (longest tokens)"));
}

/// Compiling a format on a compiler that has compiled nothing (its cache empty); building the
/// compiler is not timed.
void bm_compile_cold(benchmark::State& state) {
  const auto loaded = tokenizer_of(state.range(0));
  if (!loaded) return state.SkipWithError(message_of(loaded.error()).c_str());
  const auto& tok = *loaded;
  const auto c = constraint_of(formats[state.range(1)]);
  for (auto _ : state) {
    state.PauseTiming();
    auto compiler = std::make_unique<grammar::grammar_compiler>(*tok, tok->vocab_size());
    state.ResumeTiming();
    auto compiled = compiler->compile(c);
    if (!compiled) return state.SkipWithError(message_of(compiled.error()).c_str());
    state.PauseTiming();
    compiled->reset();
    compiler.reset();
    state.ResumeTiming();
  }
  state.SetLabel(label_of(state));
}

/// Compiling a format that the compiler's cache holds (what every request after the first with
/// the same format pays).
void bm_compile_cached(benchmark::State& state) {
  const auto loaded = tokenizer_of(state.range(0));
  if (!loaded) return state.SkipWithError(message_of(loaded.error()).c_str());
  const auto& tok = *loaded;
  const auto c = constraint_of(formats[state.range(1)]);
  grammar::grammar_compiler compiler{*tok, tok->vocab_size()};
  if (auto first = compiler.compile(c); !first)
    return state.SkipWithError(message_of(first.error()).c_str());
  for (auto _ : state) {
    auto compiled = compiler.compile(c);
    if (!compiled) return state.SkipWithError(message_of(compiled.error()).c_str());
    benchmark::DoNotOptimize(compiled->get());
  }
  state.SetLabel(label_of(state));
}

/// Building a compiler: reading the vocabulary's bytes into xgrammar (once per served model).
void bm_compiler_setup(benchmark::State& state) {
  const auto loaded = tokenizer_of(state.range(0));
  if (!loaded) return state.SkipWithError(message_of(loaded.error()).c_str());
  const auto& tok = *loaded;
  for (auto _ : state) {
    grammar::grammar_compiler compiler{*tok, tok->vocab_size()};
    benchmark::DoNotOptimize(&compiler);
  }
  state.SetLabel(vocabularies[state.range(0)].name);
}

void every_format(benchmark::internal::Benchmark* b) {
  b->ArgNames({"vocab", "format"});
  for (int64_t v = 0; v < int64_t(std::size(vocabularies)); ++v)
    for (int64_t f = 0; f < int64_t(std::size(formats)); ++f) b->Args({v, f});
}

}  // namespace

BENCHMARK(bm_mask)->Apply(every_format)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_compile_cold)->Apply(every_format)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_compile_cached)->Apply(every_format)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_compiler_setup)
    ->ArgName("vocab")
    ->DenseRange(0, int64_t(std::size(vocabularies)) - 1)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
