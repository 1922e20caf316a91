// Runs of a model against a reference's: the fixtures that tools/fixtures/make_hf_models.py and
// make_gguf_models.py write (NAME.expected.json: prompts, greedy tokens, which steps have logits;
// NAME.logits.f32 beside it), and a greedy or teacher-forced run of the model over its prompts.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/causal_lm.hpp"
#include "model/slot_tables.hpp"
#include "sampling/sampler.hpp"

namespace conveyor::test {

/// One .expected.json with its logits file.
struct reference_run {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<int32_t>> generated;
  std::vector<int32_t> logit_steps;
  int32_t vocab = 0;
  std::vector<float> logits;  // [prompt, step, vocab]

  const float* logits_of(size_t prompt, size_t step_index) const {
    return logits.data() + (prompt * logit_steps.size() + step_index) * size_t(vocab);
  }
};

/// Reads `path` (NAME.expected.json) and the logits file it names, beside it.
inline reference_run load_reference(const std::string& path) {
  reference_run r;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  auto j = nlohmann::json::parse(in);
  r.prompts = j["prompts"].get<std::vector<std::vector<int32_t>>>();
  r.generated = j["generated"].get<std::vector<std::vector<int32_t>>>();
  r.logit_steps = j["logit_steps"].get<std::vector<int32_t>>();
  r.vocab = j["vocab_size"].get<int32_t>();
  r.logits.resize(r.prompts.size() * r.logit_steps.size() * size_t(r.vocab));
  const std::string dir = path.substr(0, path.find_last_of('/') + 1);
  std::ifstream bin(dir + j["logits_file"].get<std::string>(), std::ios::binary);
  bin.read(reinterpret_cast<char*>(r.logits.data()), std::streamsize(r.logits.size() * 4));
  EXPECT_TRUE(bin.good()) << path << ": logits file too short";
  return r;
}

/// A run of the model: per prompt, the tokens it chose and the logits of every step.
struct model_run {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<std::vector<float>>> logits;  // [prompt][step][vocab]
};

/// Runs the prompts (all in one batch, or one at a time) for `steps` steps. With `forced`, the
/// next input is the forced token instead of the model's own choice (teacher forcing).
inline model_run run(model::causal_lm& m, const std::vector<std::vector<int32_t>>& prompts,
                     int32_t steps, bool batched,
                     const std::vector<std::vector<int32_t>>* forced = nullptr) {
  model_run out;
  out.tokens.resize(prompts.size());
  out.logits.resize(prompts.size());
  auto record = [&](size_t p, const float* row, int32_t vocab) {
    out.logits[p].emplace_back(row, row + vocab);
    out.tokens[p].push_back(sampling::argmax(row, vocab));
  };
  auto next_of = [&](size_t p) {
    const size_t step = out.tokens[p].size() - 1;
    return forced ? (*forced)[p][step] : out.tokens[p].back();
  };
  const size_t group = batched ? prompts.size() : 1;
  const model::slot_tables tables(m);
  for (size_t first = 0; first < prompts.size(); first += group) {
    std::vector<model::prefill_item> items;
    for (size_t p = first; p < first + group; ++p)
      items.push_back(
          {tables[int32_t(p - first)], 0, prompts[p].data(), int32_t(prompts[p].size()), -1});
    auto logits = m.prefill(items);
    for (size_t i = 0; i < group; ++i) record(first + i, logits.row(int32_t(i)), logits.vocab);
    for (int32_t step = 1; step < steps; ++step) {
      std::vector<model::decode_item> decode;
      for (size_t p = first; p < first + group; ++p)
        decode.push_back(
            {tables[int32_t(p - first)], int32_t(prompts[p].size()) + step - 1, next_of(p)});
      auto rows = m.decode(decode);
      for (size_t i = 0; i < group; ++i) record(first + i, rows.row(int32_t(i)), rows.vocab);
    }
  }
  return out;
}

inline float max_difference(const reference_run& ref, const model_run& got) {
  float worst = 0;
  for (size_t p = 0; p < ref.prompts.size(); ++p)
    for (size_t k = 0; k < ref.logit_steps.size(); ++k) {
      const float* want = ref.logits_of(p, k);
      const auto& have = got.logits[p][size_t(ref.logit_steps[k])];
      for (int32_t v = 0; v < ref.vocab; ++v)
        worst = std::max(worst, std::fabs(want[v] - have[size_t(v)]));
    }
  return worst;
}

}  // namespace conveyor::test
