// Log-probabilities and echo on the real stories260K model through the executor, both networks:
// at temperature 0 they equal the float64 reference of transformers (tests/fixtures/logprobs,
// tools/fixtures/make_logprobs.py) within 1e-4, and so do the teacher-forced prompt's.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <numeric>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/model_files.hpp"
#include "model/causal_lm.hpp"
#include "tokenizers/tokenizer.hpp"
#include "pipeline/executor_core.hpp"

using namespace conveyor;
using namespace conveyor::pipeline;
using json = nlohmann::json;

namespace {

constexpr double tolerance = 1e-4;

struct run_result {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<token_logprob> logprobs;
  std::vector<token_logprob> prompt_logprobs;
  request_result result;
};

class logprobs_test : public ::testing::TestWithParam<model::llama_network> {
 protected:
  void SetUp() override {
    auto tok = tokenizers::load_tokenizer(test::source_path("models/stories260K/tok512.model"));
    ASSERT_TRUE(tok) << message_of(tok.error());
    tokenizer = *tok;
    std::ifstream in(test::source_path("tests/fixtures/logprobs/stories260K.json"));
    ASSERT_TRUE(in) << "no fixture";
    fixture = json::parse(in);
  }

  std::unique_ptr<executor_core> make_core(int32_t slots, int32_t context = 0) {
    model::runtime_options opt;
    opt.slots = slots;
    opt.context = context;
    // With a context, forward passes as short as the context: capacity max(batched, slots, context).
    if (context > 0) opt.max_batched_tokens = 1;
    opt.network = GetParam();
    auto m = model::load_model(test::stories_model(), opt);
    EXPECT_TRUE(m);
    return std::make_unique<executor_core>("test", std::move(*m), tokenizer);
  }

  sequence_request request(request_id id, const json& c, int32_t top, bool prompt) {
    sequence_request r;
    r.id = id;
    r.prompt = *tokenizer->encode(c["prompt"].get<std::string>(), true);
    r.params.max_tokens = int32_t(c["greedy_tokens"].size());
    r.params.temperature = 0;
    r.params.logprobs = top;
    r.params.prompt_logprobs = prompt;
    r.params.echo = prompt;
    r.times.arrival = now_stamp();
    return r;
  }

  static std::map<request_id, run_result> run(executor_core& core) {
    std::map<request_id, run_result> out;
    for (int i = 0; i < 1000 && core.has_work(); ++i) {
      auto step = core.step();
      for (auto& c : step.chunks) {
        auto& r = out[c.id];
        r.text += c.text;
        r.tokens.insert(r.tokens.end(), c.tokens.begin(), c.tokens.end());
        r.logprobs.insert(r.logprobs.end(), c.logprobs.begin(), c.logprobs.end());
        if (!c.prompt_logprobs.empty()) {
          EXPECT_TRUE(r.prompt_logprobs.empty()) << "prompt log-probabilities twice";
          r.prompt_logprobs = c.prompt_logprobs;
        }
      }
      for (auto& r : step.results) {
        out[r.id].result = r;
        out[r.id].text += r.tail;
      }
    }
    return out;
  }

  // The reference's `top` best ids of a row of log-probabilities, most likely first.
  static std::vector<int32_t> best(const json& row, size_t top) {
    std::vector<int32_t> ids(row.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
      return row[a].get<double>() > row[b].get<double>();
    });
    ids.resize(top);
    return ids;
  }

  // One position: the chosen token's and every alternative's value equal the reference row's,
  // and the alternatives are the reference's best (ranks may swap only within the tolerance).
  static void expect_position(const token_logprob& got, const json& row, size_t top,
                              const std::string& where) {
    EXPECT_NEAR(got.chosen.logprob, row[got.chosen.token].get<double>(), tolerance) << where;
    ASSERT_EQ(got.top.size(), top) << where;
    const auto ref = best(row, top);
    for (size_t k = 0; k < top; ++k) {
      EXPECT_NEAR(got.top[k].logprob, row[got.top[k].token].get<double>(), tolerance) << where;
      EXPECT_NEAR(got.top[k].logprob, row[ref[k]].get<double>(), tolerance)
          << where << " rank " << k;
    }
  }

  void expect_case(const run_result& r, const json& c, size_t top, bool prompt) {
    const std::string name = c["prompt"].get<std::string>();
    const auto greedy = c["greedy_tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(r.result.how, outcome::finished) << name;
    // An end token (BOS/EOS) ends the run: it is reported in the log-probabilities only.
    const bool ended = greedy.back() == 1 || greedy.back() == 2;
    std::vector<int32_t> chosen;
    for (const auto& e : r.logprobs) chosen.push_back(e.chosen.token);
    EXPECT_EQ(chosen, greedy) << name;
    EXPECT_EQ(r.tokens, std::vector<int32_t>(greedy.begin(), greedy.end() - (ended ? 1 : 0)))
        << name;
    ASSERT_EQ(r.logprobs.size(), greedy.size()) << name;
    std::string pieces;
    for (size_t j = 0; j < greedy.size(); ++j) {
      const auto& row = c["step_log_softmax"][j];
      const std::string where = name + " step " + std::to_string(j);
      expect_position(r.logprobs[j], row, top, where);
      // The sampled token is the reference's most likely one.
      EXPECT_EQ(r.logprobs[j].chosen.token, best(row, 1)[0]) << where;
      if (top > 0) {
        EXPECT_EQ(r.logprobs[j].top[0].token, r.logprobs[j].chosen.token) << where;
      }
      pieces += r.logprobs[j].chosen.text;
    }
    // Each token's text is what it added to the output.
    EXPECT_EQ(pieces, r.text) << name;
    if (!prompt) {
      EXPECT_TRUE(r.prompt_logprobs.empty()) << name;
      return;
    }
    const auto ids = c["prompt_tokens"].get<std::vector<int32_t>>();
    ASSERT_EQ(r.prompt_logprobs.size(), ids.size()) << name;
    EXPECT_TRUE(std::isnan(r.prompt_logprobs[0].chosen.logprob)) << name;
    EXPECT_TRUE(r.prompt_logprobs[0].top.empty()) << name;
    std::string prompt_text;
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(r.prompt_logprobs[i].chosen.token, ids[i]) << name;
      prompt_text += r.prompt_logprobs[i].chosen.text;
      if (i == 0) continue;
      const std::string where = name + " prompt token " + std::to_string(i);
      EXPECT_NEAR(r.prompt_logprobs[i].chosen.logprob, c["prompt_logprobs"][i].get<double>(),
                  tolerance)
          << where;
      expect_position(r.prompt_logprobs[i], c["prompt_log_softmax"][i - 1], top, where);
    }
    // The prompt's token texts spell the prompt (BOS adds none, its following space dropped).
    EXPECT_EQ(prompt_text, name);
  }

  std::shared_ptr<const tokenizers::tokenizer> tokenizer;
  json fixture;
};

}  // namespace

TEST_P(logprobs_test, greedy_logprobs_equal_the_float64_reference_alone) {
  for (const auto& c : fixture["cases"]) {
    auto core = make_core(1);
    step_output admitted;
    core->admit({request(1, c, 5, false)}, false, admitted);
    auto out = run(*core);
    expect_case(out[1], c, 5, false);
  }
}

TEST_P(logprobs_test, prompt_logprobs_equal_the_teacher_forced_reference_in_one_batch) {
  // Every case in one prefill, with and without prompt log-probabilities: the rows of each item
  // (all of a prompt's, or its last) are told apart.
  auto core = make_core(8);
  std::vector<sequence_request> batch;
  request_id id = 1;
  for (const auto& c : fixture["cases"]) {
    batch.push_back(request(id++, c, 3, true));
    batch.push_back(request(id++, c, 20, false));
  }
  step_output admitted;
  core->admit(std::move(batch), false, admitted);
  auto out = run(*core);
  id = 1;
  for (const auto& c : fixture["cases"]) {
    expect_case(out[id++], c, 3, true);
    expect_case(out[id++], c, 20, false);
  }
}

TEST_P(logprobs_test, prompt_logprobs_of_more_rows_than_a_forward_pass) {
  // A context of 40 tokens makes the network's passes 40 rows; 16 requests, half of them with
  // every prompt position's logits, need 64 rows of logits from 3 passes.
  auto core = make_core(16, 40);
  std::vector<sequence_request> batch;
  request_id id = 1;
  for (int copy = 0; copy < 2; ++copy)
    for (const auto& c : fixture["cases"]) {
      batch.push_back(request(id++, c, 2, true));
      batch.push_back(request(id++, c, 1, false));
    }
  step_output admitted;
  core->admit(std::move(batch), false, admitted);
  ASSERT_TRUE(admitted.results.empty());
  auto out = run(*core);
  id = 1;
  for (int copy = 0; copy < 2; ++copy)
    for (const auto& c : fixture["cases"]) {
      expect_case(out[id++], c, 2, true);
      expect_case(out[id++], c, 1, false);
    }
}

TEST_P(logprobs_test, prompt_logprobs_across_prefill_chunks_equal_those_of_whole_prompts) {
  // The same requests with their prompts cut into chunks of 1, 2 and 3 tokens over several
  // steps: every prompt position's log-probability, alternatives and text as from the whole
  // prompt (within 1e-5 on the plain loops, 1e-4 on torch operations), and both within the
  // reference's tolerance.
  auto requests = [&] {
    std::vector<sequence_request> batch;
    request_id id = 1;
    for (const auto& c : fixture["cases"]) {
      batch.push_back(request(id++, c, 3, true));
      batch.push_back(request(id++, c, 2, false));
    }
    return batch;
  };
  auto whole_core = make_core(8);
  step_output admitted;
  whole_core->admit(requests(), false, admitted);
  auto whole = run(*whole_core);
  // The plain loops sum every row in one order whatever the rows around it, so chunks change
  // nothing but float32 rounding in attention; torch's BLAS (the CUDA build's wheel runs it on
  // the CPU here) blocks its products by their row count, which moves logprobs near -4 by about
  // 1e-5.
  const double chunk_tolerance = GetParam() == model::llama_network::loops ? 1e-5 : 1e-4;
  for (int32_t chunk : {1, 2, 3}) {
    SCOPED_TRACE("chunks of " + std::to_string(chunk));
    auto core = make_core(8);
    step_plan_options o;
    o.max_prompt_tokens = chunk;
    o.min_prompt_tokens = 1;
    core->set_step_plan_options(o);
    core->admit(requests(), false, admitted);
    auto out = run(*core);
    request_id id = 1;
    for (const auto& c : fixture["cases"]) {
      expect_case(out[id], c, 3, true);
      const auto& a = out[id].prompt_logprobs;
      const auto& b = whole[id].prompt_logprobs;
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].chosen.token, b[i].chosen.token) << i;
        EXPECT_EQ(a[i].chosen.text, b[i].chosen.text) << i;
        if (i == 0) {
          EXPECT_TRUE(std::isnan(a[i].chosen.logprob));
          continue;
        }
        EXPECT_NEAR(a[i].chosen.logprob, b[i].chosen.logprob, chunk_tolerance) << i;
        ASSERT_EQ(a[i].top.size(), b[i].top.size()) << i;
        for (size_t k = 0; k < a[i].top.size(); ++k) {
          EXPECT_EQ(a[i].top[k].token, b[i].top[k].token) << i << " rank " << k;
          EXPECT_NEAR(a[i].top[k].logprob, b[i].top[k].logprob, chunk_tolerance) << i << " rank " << k;
          EXPECT_EQ(a[i].top[k].text, b[i].top[k].text) << i << " rank " << k;
        }
      }
      EXPECT_EQ(out[id].tokens, whole[id].tokens);
      ++id;
      expect_case(out[id], c, 2, false);
      EXPECT_EQ(out[id].tokens, whole[id].tokens);
      ++id;
    }
  }
}

TEST_P(logprobs_test, echo_with_max_tokens_zero_only_scores_the_prompt) {
  const auto& c = fixture["cases"][1];
  auto core = make_core(2);
  auto r = request(1, c, 0, true);
  r.params.max_tokens = 0;
  auto plain = request(2, c, -1, false);  // beside it, one that generates
  step_output admitted;
  core->admit({r, plain}, false, admitted);
  auto out = run(*core);
  EXPECT_EQ(out[1].result.how, outcome::finished);
  EXPECT_EQ(out[1].result.reason, finish_reason::length);
  EXPECT_EQ(out[1].result.completion_tokens, 0);
  EXPECT_EQ(out[1].result.prompt_tokens, int32_t(c["prompt_tokens"].size()));
  EXPECT_TRUE(out[1].tokens.empty());
  EXPECT_TRUE(out[1].logprobs.empty());
  EXPECT_EQ(out[1].text, "");
  ASSERT_EQ(out[1].prompt_logprobs.size(), c["prompt_tokens"].size());
  for (size_t i = 1; i < c["prompt_tokens"].size(); ++i)
    EXPECT_NEAR(out[1].prompt_logprobs[i].chosen.logprob, c["prompt_logprobs"][i].get<double>(),
                tolerance);
  // The other request is untouched: the reference's greedy tokens, no log-probabilities.
  EXPECT_EQ(out[2].tokens, c["greedy_tokens"].get<std::vector<int32_t>>());
  EXPECT_TRUE(out[2].logprobs.empty());
  EXPECT_TRUE(out[2].prompt_logprobs.empty());
}

TEST_P(logprobs_test, sampled_tokens_are_scored_under_top_k) {
  // At temperature 0.8 with top_k 3 every reported token is one of the 3 kept: finite, the
  // three probabilities sum to 1, and the alternatives beyond them are -infinity.
  const auto& c = fixture["cases"][0];
  auto core = make_core(1);
  auto r = request(1, c, 5, false);
  r.params.temperature = 0.8f;
  r.params.top_k = 3;
  r.params.seed = 42;
  r.params.max_tokens = 10;
  step_output admitted;
  core->admit({r}, false, admitted);
  auto out = run(*core);
  ASSERT_FALSE(out[1].logprobs.empty());
  for (const auto& e : out[1].logprobs) {
    EXPECT_TRUE(std::isfinite(e.chosen.logprob));
    ASSERT_EQ(e.top.size(), 5u);
    double mass = 0;
    for (int k = 0; k < 3; ++k) mass += std::exp(double(e.top[k].logprob));
    EXPECT_NEAR(mass, 1.0, 1e-5);
    for (int k = 3; k < 5; ++k) EXPECT_EQ(e.top[k].logprob, -INFINITY);
  }
}

TEST_P(logprobs_test, the_end_token_is_reported_last_without_text) {
  // stories260K ends a story with BOS: its log-probability comes after the last token's, as
  // vLLM reports the end token, with no text and not counted as a completion token.
  const auto& c = fixture["cases"][0];
  auto core = make_core(1);
  auto r = request(1, c, 2, false);
  r.params.max_tokens = 400;
  step_output admitted;
  core->admit({r}, false, admitted);
  auto out = run(*core);
  EXPECT_EQ(out[1].result.reason, finish_reason::stop);
  ASSERT_EQ(out[1].logprobs.size(), out[1].tokens.size() + 1);
  EXPECT_EQ(out[1].result.completion_tokens, int32_t(out[1].tokens.size()));
  const auto& end = out[1].logprobs.back();
  EXPECT_EQ(end.chosen.token, 1);
  EXPECT_EQ(end.chosen.text, "");
  EXPECT_LE(end.chosen.logprob, 0.0f);
  EXPECT_EQ(end.top.at(0).token, 1);  // greedy: the most likely
  for (size_t i = 0; i < out[1].tokens.size(); ++i)
    EXPECT_EQ(out[1].logprobs[i].chosen.token, out[1].tokens[i]);
}

TEST_P(logprobs_test, the_token_that_completes_a_stop_string_is_reported) {
  // As vLLM does: the stop string is cut from the text, the tokens that made it are reported.
  const auto& c = fixture["cases"][0];
  auto core = make_core(1);
  auto r = request(1, c, 1, false);
  r.params.max_tokens = 40;
  r.params.stop = {" girl"};
  step_output admitted;
  core->admit({r}, false, admitted);
  auto out = run(*core);
  EXPECT_EQ(out[1].result.reason, finish_reason::stop);
  EXPECT_EQ(out[1].text.find("girl"), std::string::npos) << out[1].text;
  ASSERT_EQ(out[1].logprobs.size(), out[1].tokens.size());
  std::string pieces;
  for (const auto& e : out[1].logprobs) pieces += e.chosen.text;
  EXPECT_EQ(pieces, out[1].text + " girl") << out[1].text;
}

INSTANTIATE_TEST_SUITE_P(networks, logprobs_test,
                         ::testing::Values(model::llama_network::loops,
                                           model::llama_network::torch_ops),
                         [](const auto& info) {
                           return info.param == model::llama_network::loops ? "loops" : "torch_ops";
                         });
