// Tokenizer encoding speed on one thread, in MB/s of UTF-8 text (bytes_per_second): the
// tokenizer.json fixtures of tests/fixtures/tokenizers/ and the SentencePiece model, on mixed text
// (the fixture corpus and the workload prompts, many words repeat) and on text of random words
// (few repeat, so the BPE word cache rarely helps).
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "tokenizers/tokenizer.hpp"

using namespace conveyor::tokenizers;

namespace {

const std::string source_dir = CONVEYOR_SOURCE_DIR;

/// Documents of about 4 KB, about 4 MB in all, from the corpus (with its workload prompts).
const std::vector<std::string>& mixed_documents() {
  static const std::vector<std::string> docs = [] {
    std::ifstream in{source_dir + "/tests/fixtures/tokenizers/corpus.json"};
    std::stringstream text;
    text << in.rdbuf();
    const auto strings =
        nlohmann::json::parse(text.str())["strings"].get<std::vector<std::string>>();
    std::vector<std::string> out(1);
    size_t total = 0;
    for (size_t round = 0; total < (4u << 20); ++round)
      for (size_t i = 0; i < strings.size() && total < (4u << 20); ++i) {
        // Shift the order each round so that documents differ.
        const auto& s = strings[(i * 7 + round * 13) % strings.size()];
        if (out.back().size() > 4096) out.emplace_back();
        out.back() += s;
        out.back() += '\n';
        total += s.size() + 1;
      }
    return out;
  }();
  return docs;
}

/// Documents of random lowercase words with spaces and punctuation, about 4 MB.
const std::vector<std::string>& random_documents() {
  static const std::vector<std::string> docs = [] {
    std::mt19937 rng{42};
    std::uniform_int_distribution<int> letter{'a', 'z'};
    std::uniform_int_distribution<int> length{1, 10};
    std::vector<std::string> out(1);
    for (size_t total = 0; total < (4u << 20);) {
      if (out.back().size() > 4096) out.emplace_back();
      std::string word = " ";
      for (int n = length(rng); n > 0; --n) word += static_cast<char>(letter(rng));
      if (rng() % 10 == 0) word += ',';
      out.back() += word;
      total += word.size();
    }
    return out;
  }();
  return docs;
}

void encode_all(benchmark::State& state, const std::string& path,
                const std::vector<std::string>& docs) {
  auto tok = load_tokenizer(source_dir + "/" + path);
  if (!tok) {
    state.SkipWithError(conveyor::message_of(tok.error()).c_str());
    return;
  }
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  size_t tokens = 0;
  for (auto _ : state) {
    tokens = 0;
    for (const auto& d : docs) {
      auto ids = (*tok)->encode(d, true);
      if (!ids) {
        state.SkipWithError(conveyor::message_of(ids.error()).c_str());
        return;
      }
      tokens += ids->size();
      benchmark::DoNotOptimize(ids->data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes_per_token"] = static_cast<double>(bytes) / static_cast<double>(tokens);
}

void bm_mixed(benchmark::State& state, const char* path) {
  encode_all(state, path, mixed_documents());
}

void bm_random_words(benchmark::State& state, const char* path) {
  encode_all(state, path, random_documents());
}

}  // namespace

BENCHMARK_CAPTURE(bm_mixed, gpt2, "tests/fixtures/tokenizers/gpt2/tokenizer.json")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_mixed, llama3, "tests/fixtures/tokenizers/llama3/tokenizer.json")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_mixed, llama_spm, "tests/fixtures/tokenizers/llama_spm/tokenizer.json")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_mixed, sentencepiece, "models/stories260K/tok512.model")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_random_words, gpt2, "tests/fixtures/tokenizers/gpt2/tokenizer.json")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_random_words, llama_spm, "tests/fixtures/tokenizers/llama_spm/tokenizer.json")
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
