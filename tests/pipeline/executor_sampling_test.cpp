// The executor's logit processing on the real stories260K model: penalties and logit_bias give
// the tokens of a plain reference decoder that applies the formulas itself, min_tokens and
// stop_token_ids end sequences as vLLM does.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include <gtest/gtest.h>

#include "model/causal_lm.hpp"
#include "model/slot_tables.hpp"
#include "pipeline/executor_core.hpp"
#include "tests/support/model_files.hpp"
#include "tokenizers/tokenizer.hpp"

using namespace conveyor;
using namespace conveyor::pipeline;

namespace {

struct run_result {
  std::string text;
  std::vector<int32_t> tokens;
  request_result result;
};

// Greedy decoding of `prompt` for `n` tokens where `adjust(row, generated so far)` edits the
// logits (in double) first: the reference, independent of sampling::logit_processor.
using adjust_fn = std::function<void(std::vector<double>&, const std::vector<int32_t>&)>;

class executor_sampling_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = tokenizers::load_tokenizer(test::source_path("models/stories260K/tok512.model"));
    ASSERT_TRUE(tok) << message_of(tok.error());
    tokenizer = *tok;
    expected = test::load_expected_run();
  }

  std::unique_ptr<model::causal_lm> load(int32_t slots) {
    model::runtime_options opt;
    opt.slots = slots;
    auto m = model::load_model(test::stories_model(), opt);
    EXPECT_TRUE(m);
    return std::move(*m);
  }

  sequence_request request(const std::string& prompt, int32_t max_tokens) {
    sequence_request r;
    r.id = 1;
    r.prompt = *tokenizer->encode(prompt, true);
    r.params.max_tokens = max_tokens;
    r.params.temperature = 0;
    r.times.arrival = now_stamp();
    return r;
  }

  run_result run(const sequence_request& r) {
    executor_core core{"test", load(1), tokenizer};
    step_output admitted;
    core.admit({r}, false, admitted);
    EXPECT_TRUE(admitted.results.empty());
    run_result out;
    for (int i = 0; i < 10000 && core.has_work(); ++i) {
      auto step = core.step();
      for (auto& c : step.chunks) {
        out.text += c.text;
        out.tokens.insert(out.tokens.end(), c.tokens.begin(), c.tokens.end());
      }
      for (auto& res : step.results) {
        out.result = res;
        out.text += res.tail;
      }
    }
    return out;
  }

  std::vector<int32_t> reference(const std::vector<int32_t>& prompt, int32_t n,
                                 const adjust_fn& adjust) {
    auto m = load(1);
    const model::slot_tables tables(*m);
    auto logits =
        m->prefill({model::prefill_item{tables[0], 0, prompt.data(), int32_t(prompt.size()), -1}});
    std::vector<int32_t> generated;
    int32_t position = int32_t(prompt.size());
    for (int32_t i = 0; i < n; ++i) {
      std::vector<double> row(logits.row(0), logits.row(0) + logits.vocab);
      adjust(row, generated);
      const int32_t token = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
      generated.push_back(token);
      logits = m->decode({model::decode_item{tables[0], position++, token}});
    }
    return generated;
  }

  std::shared_ptr<const tokenizers::tokenizer> tokenizer;
  test::expected_run expected;
  const std::string story_prompt = "Once upon a time";
};

}  // namespace

TEST_F(executor_sampling_test, presence_and_frequency_penalties_match_the_reference) {
  auto r = request(story_prompt, 40);
  r.params.ignore_eos = true;
  r.params.presence_penalty = 0.7f;
  r.params.frequency_penalty = 0.4f;
  auto want = reference(r.prompt, 40, [](std::vector<double>& row, const std::vector<int32_t>& g) {
    std::map<int32_t, int> count;
    for (auto t : g) ++count[t];
    for (auto [t, c] : count) row[size_t(t)] -= 0.4 * c + 0.7;
  });
  auto got = run(r);
  EXPECT_EQ(got.tokens, want);
  // The penalties change this story (else the test would not test them).
  const auto story = expected.generated();
  EXPECT_NE(want, std::vector<int32_t>(story.begin(), story.begin() + 40));
}

TEST_F(executor_sampling_test, repetition_penalty_matches_the_reference) {
  auto r = request(story_prompt, 40);
  r.params.ignore_eos = true;
  r.params.repetition_penalty = 1.8f;
  const auto prompt = r.prompt;
  auto want = reference(r.prompt, 40, [&](std::vector<double>& row, const std::vector<int32_t>& g) {
    std::vector<int32_t> seen = prompt;
    seen.insert(seen.end(), g.begin(), g.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    const double p = double(1.8f);
    for (auto t : seen)
      row[size_t(t)] = row[size_t(t)] > 0 ? row[size_t(t)] / p : row[size_t(t)] * p;
  });
  auto got = run(r);
  EXPECT_EQ(got.tokens, want);
  const auto story = expected.generated();
  EXPECT_NE(want, std::vector<int32_t>(story.begin(), story.begin() + 40));
}

TEST_F(executor_sampling_test, a_bias_of_minus_100_on_the_greedy_token_keeps_it_out) {
  const int32_t first = expected.generated().at(0);
  auto r = request(story_prompt, 20);
  r.params.logit_bias = {{first, -100.0f}};
  auto want = reference(r.prompt, 20, [&](std::vector<double>& row, const std::vector<int32_t>&) {
    row[size_t(first)] += -100.0;
  });
  auto got = run(r);
  ASSERT_FALSE(got.tokens.empty());
  EXPECT_NE(got.tokens[0], first);
  EXPECT_EQ(std::count(got.tokens.begin(), got.tokens.end(), first), 0);
  EXPECT_EQ(got.tokens, std::vector<int32_t>(want.begin(), want.begin() + got.tokens.size()));
}

TEST_F(executor_sampling_test, stop_token_ids_end_with_stop_and_are_not_output) {
  const auto story = expected.generated();
  // The fifth token of the story, where it first appears.
  const int32_t stop_id = story.at(4);
  const auto at = std::find(story.begin(), story.end(), stop_id) - story.begin();
  auto r = request(story_prompt, 60);
  r.params.stop_token_ids = {stop_id};
  r.params.ignore_eos = true;  // stop ids stop even so
  auto got = run(r);
  EXPECT_EQ(got.result.reason, finish_reason::stop);
  EXPECT_EQ(got.tokens, std::vector<int32_t>(story.begin(), story.begin() + at));
  EXPECT_EQ(got.result.completion_tokens, int32_t(at));
  std::string want_text;
  {
    tokenizers::incremental_detokenizer d{tokenizer, r.prompt.back()};
    for (auto i = 0; i < at; ++i) want_text += d.push(story[size_t(i)]);
    want_text += d.flush();
  }
  EXPECT_EQ(got.text, want_text);
}

TEST_F(executor_sampling_test, min_tokens_masks_stop_token_ids_until_reached) {
  const auto story = expected.generated();
  const int32_t stop_id = story.at(4);
  const auto at = std::find(story.begin(), story.end(), stop_id) - story.begin();
  auto r = request(story_prompt, 60);
  r.params.stop_token_ids = {stop_id};
  r.params.min_tokens = int32_t(at) + 10;
  const int32_t bos = tokenizer->bos_id(), eos = tokenizer->eos_id();
  auto want = reference(r.prompt, r.params.min_tokens,
                        [&](std::vector<double>& row, const std::vector<int32_t>&) {
                          for (auto id : {stop_id, bos, eos})
                            row[size_t(id)] = -std::numeric_limits<double>::infinity();
                        });
  auto got = run(r);
  ASSERT_GE(got.tokens.size(), size_t(r.params.min_tokens));
  EXPECT_EQ(std::vector<int32_t>(got.tokens.begin(), got.tokens.begin() + r.params.min_tokens),
            want);
  EXPECT_EQ(std::count(want.begin(), want.end(), stop_id), 0);
  // Afterwards the stop id ends it again, if it comes; otherwise max_tokens does.
  if (got.result.reason == finish_reason::stop)
    EXPECT_LT(got.result.completion_tokens, 60);
  else
    EXPECT_EQ(got.result.completion_tokens, 60);
}

TEST_F(executor_sampling_test, min_tokens_masks_the_end_token) {
  // A greedy run of the story ends by itself (stories260K ends a story with BOS).
  auto plain = run(request(story_prompt, 400));
  ASSERT_EQ(plain.result.reason, finish_reason::stop);
  const int32_t n = plain.result.completion_tokens;
  auto r = request(story_prompt, 400);
  r.params.min_tokens = n + 5;
  auto got = run(r);
  EXPECT_GE(got.result.completion_tokens, n + 5);
  EXPECT_EQ(std::vector<int32_t>(got.tokens.begin(), got.tokens.begin() + n), plain.tokens);
  for (auto t : got.tokens) EXPECT_NE(t, tokenizer->bos_id());
}

TEST_F(executor_sampling_test, stop_strings_do_not_end_before_min_tokens) {
  // Alone, "Lily" ends the story after ", there was a little girl named ".
  auto r = request(story_prompt, 60);
  r.params.stop = {"Lily"};
  auto early = run(r);
  ASSERT_EQ(early.text, ", there was a little girl named ");
  const int32_t before = early.result.completion_tokens;
  r.params.min_tokens = before + 3;
  r.params.max_tokens = 64;
  auto got = run(r);
  EXPECT_GE(got.result.completion_tokens, before + 3);
  // The greedy story (64 tokens) names Lily again at the start of its second line: that "Lily",
  // after min_tokens, ends it.
  const std::string story = expected.text.substr(story_prompt.size());
  const auto second = story.find("Lily", story.find("Lily") + 4);
  ASSERT_NE(second, std::string::npos);
  EXPECT_EQ(got.text, story.substr(0, second));
  EXPECT_EQ(got.result.reason, finish_reason::stop);
}

// A stop string that begins before the min_tokens-th token and ends with it, or after it, is
// found: the text ends right before it (in the story run.c printed), as vLLM checks stop strings
// once min_tokens tokens exist.
TEST_F(executor_sampling_test, stop_strings_across_the_min_tokens_boundary_are_found) {
  const auto story_tokens = expected.generated();
  const std::string story = expected.text.substr(story_prompt.size());
  // The text of each generated token, in the context of the tokens before it.
  std::vector<std::string> pieces;
  {
    tokenizers::incremental_detokenizer d{tokenizer, tokenizer->encode(story_prompt, true)->back()};
    for (size_t i = 0; i < 12; ++i) pieces.push_back(d.push(story_tokens[i]));
  }
  for (int32_t min_tokens : {4, 6, 9}) {
    // Token min_tokens is pieces[min_tokens - 1]; where the text before it ends:
    size_t boundary = 0;
    for (int32_t i = 0; i < min_tokens - 1; ++i) boundary += pieces[size_t(i)].size();
    ASSERT_EQ(story.substr(0, boundary + pieces[size_t(min_tokens - 1)].size()), [&] {
      std::string s;
      for (int32_t i = 0; i < min_tokens; ++i) s += pieces[size_t(i)];
      return s;
    }());
    const size_t begin = boundary - std::min<size_t>(2, pieces[size_t(min_tokens - 2)].size());
    const std::string& next = pieces[size_t(min_tokens)];
    // Ending in the min_tokens-th token, and ending in the token after it.
    for (size_t end :
         {boundary + pieces[size_t(min_tokens - 1)].size(),
          boundary + pieces[size_t(min_tokens - 1)].size() + std::min<size_t>(1, next.size())}) {
      const std::string stop = story.substr(begin, end - begin);
      ASSERT_EQ(story.find(stop), begin) << "'" << stop << "' must first appear there";
      auto r = request(story_prompt, 40);
      r.params.stop = {stop};
      r.params.min_tokens = min_tokens;
      auto got = run(r);
      EXPECT_EQ(got.result.reason, finish_reason::stop)
          << "min_tokens " << min_tokens << ", stop '" << stop << "'";
      EXPECT_EQ(got.text, story.substr(0, begin))
          << "min_tokens " << min_tokens << ", stop '" << stop << "'";
    }
  }
}
