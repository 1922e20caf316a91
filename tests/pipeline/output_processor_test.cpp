// The output processor alone, on a fake tokenizer: tokens become whole characters of text, stop
// strings are held back and cut, end ids, max_tokens and the context end a sequence exactly
// once, with its held-back text as the tail, and log-probabilities carry the texts of their
// tokens.
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline/output_processor.hpp"
#include "tests/support/fake_tokenizer.hpp"

using namespace conveyor;
using namespace conveyor::pipeline;
using tok = test::fake_tokenizer;

namespace {

constexpr int32_t context = 64;
const std::string replacement = "\xEF\xBF\xBD";  // U+FFFD

class output_processor_test : public ::testing::Test {
 protected:
  output_processor_test() {
    processor.set_clock([this] { return clock_now; });
  }

  // A sequence as the executor builds it, its prompt complete (position after the prompt).
  std::unique_ptr<sequence> make(sampling::sampling_params p,
                                 std::vector<int32_t> prompt = {tok::bos, tok::bang}) {
    sequence_request r;
    r.id = next_id++;
    r.prompt = std::move(prompt);
    r.params = std::move(p);
    output_state output = active->start(r);
    token_sampler sampler{r.params, r.prompt, output.end_ids};
    auto s = std::make_unique<sequence>(std::move(r), std::move(sampler), std::move(output));
    s->schedule.position = int32_t(s->req.prompt.size());
    return s;
  }

  // One step in which `s` gets `token`; what the step put out.
  step_output emit(sequence& s, int32_t token,
                   std::optional<sampling::token_scores> scores = std::nullopt) {
    step_output out;
    active->emit(s, sampled_token{token, std::move(scores)}, clock_now, out);
    ++s.schedule.position;
    clock_now += 1000;
    return out;
  }

  // The text of a run of tokens, and the one result that ended it.
  struct run_result {
    std::string text;
    std::vector<int32_t> tokens;
    std::vector<request_result> results;
  };
  run_result run(sequence& s, const std::vector<int32_t>& tokens) {
    run_result r;
    for (int32_t t : tokens) {
      if (s.ended) break;
      auto out = emit(s, t);
      for (auto& c : out.chunks) {
        EXPECT_EQ(c.id, s.req.id);
        r.text += c.text;
        r.tokens.insert(r.tokens.end(), c.tokens.begin(), c.tokens.end());
      }
      for (auto& res : out.results) {
        r.text += res.tail;
        r.results.push_back(res);
      }
    }
    return r;
  }

  static sampling::sampling_params with_max_tokens(int32_t n) {
    sampling::sampling_params p;
    p.max_tokens = n;
    return p;
  }

  static sampling::token_scores scores_of(int32_t token) {
    sampling::token_scores s;
    s.chosen = {token, -0.5f};
    s.top = {{token, -0.5f}, {tok::hel, -1.5f}};
    return s;
  }

  std::shared_ptr<const tok> tokenizer = std::make_shared<tok>();
  output_processor processor{tokenizer, context, {tok::eos}};
  // The processor that make() and emit() use.
  output_processor* active = &processor;
  stamp clock_now = 1'000'000;
  request_id next_id = 1;
};

}  // namespace

TEST_F(output_processor_test, end_ids_are_the_stop_token_ids_then_the_models_unless_ignored) {
  sampling::sampling_params p;
  p.stop_token_ids = {7, 9};
  EXPECT_EQ(processor.end_ids_of(p), (std::vector<int32_t>{7, 9, tok::eos}));
  p.ignore_eos = true;
  EXPECT_EQ(processor.end_ids_of(p), (std::vector<int32_t>{7, 9}));
  output_processor no_end_tokens{tokenizer, context, {}};
  p.ignore_eos = false;
  EXPECT_EQ(no_end_tokens.end_ids_of(p), (std::vector<int32_t>{7, 9}));
}

TEST_F(output_processor_test, text_goes_out_in_whole_characters) {
  auto s = make(with_max_tokens(10));
  const stamp first = clock_now;
  auto out = emit(*s, tok::hel);
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].text, "Hel");
  EXPECT_EQ(out.chunks[0].tokens, std::vector<int32_t>{tok::hel});
  EXPECT_EQ(s->req.times.first_token, first);
  // The first byte of "€" alone: the token goes out, its text waits for the character's end.
  out = emit(*s, tok::euro_head);
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].text, "");
  EXPECT_EQ(out.chunks[0].tokens, std::vector<int32_t>{tok::euro_head});
  // The texts of log-probabilities are those in the context before the token: the rest of "€".
  out = emit(*s, tok::euro_tail, scores_of(tok::euro_tail));
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].text, "\xE2\x82\xAC");
  ASSERT_EQ(out.chunks[0].logprobs.size(), 1u);
  EXPECT_EQ(out.chunks[0].logprobs[0].chosen.text, "\xE2\x82\xAC");
  EXPECT_FLOAT_EQ(out.chunks[0].logprobs[0].chosen.logprob, -0.5f);
  ASSERT_EQ(out.chunks[0].logprobs[0].top.size(), 2u);
  // An alternative that cannot complete the held byte: it shows as U+FFFD, then its own text.
  EXPECT_EQ(out.chunks[0].logprobs[0].top[1].text, replacement + "Hel");
  EXPECT_TRUE(out.results.empty());
  EXPECT_EQ(s->output.generated, 3);
  EXPECT_EQ(s->req.times.first_token, first);  // stamped once
}

TEST_F(output_processor_test, a_stop_string_across_tokens_is_held_back_and_cut) {
  auto p = with_max_tokens(10);
  p.stop = {"o wo"};
  auto s = make(p);
  auto r = run(*s, {tok::hel, tok::lo, tok::wor, tok::ld});
  // "Hello wor": the "o" that may begin the stop string is held until " wor" completes it.
  EXPECT_EQ(r.text, "Hell");
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{tok::hel, tok::lo}));
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].how, outcome::finished);
  EXPECT_EQ(r.results[0].reason, finish_reason::stop);
  EXPECT_EQ(r.results[0].tail, "");
  EXPECT_EQ(r.results[0].completion_tokens, 3);
  EXPECT_TRUE(s->ended);
}

TEST_F(output_processor_test, the_token_that_completes_a_stop_string_keeps_its_logprob) {
  auto p = with_max_tokens(10);
  p.stop = {" wor"};
  auto s = make(p);
  emit(*s, tok::lo);
  auto out = emit(*s, tok::wor, scores_of(tok::wor));
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].text, "");
  EXPECT_EQ(out.chunks[0].tokens, std::vector<int32_t>{tok::wor});
  ASSERT_EQ(out.chunks[0].logprobs.size(), 1u);
  EXPECT_EQ(out.chunks[0].logprobs[0].chosen.text, " wor");
  ASSERT_EQ(out.results.size(), 1u);
  EXPECT_EQ(out.results[0].reason, finish_reason::stop);
}

TEST_F(output_processor_test, stop_strings_count_from_the_min_tokens_th_token) {
  auto p = with_max_tokens(10);
  p.stop = {"lo"};
  // Armed from the start: "Hello" stops at once.
  auto early = make(p);
  auto r = run(*early, {tok::hel, tok::lo, tok::wor, tok::lo});
  EXPECT_EQ(r.text, "Hel");
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].completion_tokens, 2);
  // min_tokens 3: the "lo" that ends in the second token is text; the one in the fourth stops.
  p.min_tokens = 3;
  auto late = make(p);
  r = run(*late, {tok::hel, tok::lo, tok::wor, tok::lo, tok::ld});
  EXPECT_EQ(r.text, "Hello wor");
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].reason, finish_reason::stop);
  EXPECT_EQ(r.results[0].completion_tokens, 4);
}

TEST_F(output_processor_test, an_end_id_ends_without_text_and_its_logprob_comes_last) {
  auto s = make(with_max_tokens(10));
  emit(*s, tok::hel);
  auto out = emit(*s, tok::eos);
  EXPECT_TRUE(out.chunks.empty());
  ASSERT_EQ(out.results.size(), 1u);
  EXPECT_EQ(out.results[0].how, outcome::finished);
  EXPECT_EQ(out.results[0].reason, finish_reason::stop);
  EXPECT_EQ(out.results[0].completion_tokens, 1);  // the end id is not counted

  auto scored = make(with_max_tokens(10));
  out = emit(*scored, tok::eos, scores_of(tok::eos));
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_TRUE(out.chunks[0].tokens.empty());
  EXPECT_EQ(out.chunks[0].text, "");
  ASSERT_EQ(out.chunks[0].logprobs.size(), 1u);
  EXPECT_EQ(out.chunks[0].logprobs[0].chosen.token, tok::eos);
  EXPECT_EQ(out.chunks[0].logprobs[0].chosen.text, "");
  ASSERT_EQ(out.results.size(), 1u);

  // A stop_token_id ends like an end id, even with ignore_eos; EOS is then text like any other.
  auto p = with_max_tokens(10);
  p.ignore_eos = true;
  p.stop_token_ids = {tok::bang};
  auto ignoring = make(p);
  auto r = run(*ignoring, {tok::eos, tok::hel, tok::bang, tok::lo});
  EXPECT_EQ(r.text, "Hel");
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{tok::eos, tok::hel}));
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].reason, finish_reason::stop);
}

TEST_F(output_processor_test, max_tokens_and_the_context_end_with_length) {
  auto s = make(with_max_tokens(2));
  auto r = run(*s, {tok::hel, tok::lo, tok::wor});
  EXPECT_EQ(r.text, "Hello");
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].reason, finish_reason::length);
  EXPECT_EQ(r.results[0].completion_tokens, 2);

  // A context of 8 and a prompt of 2: the tokens at positions 2 to 7 fit, six in all.
  output_processor small{tokenizer, 8, {tok::eos}};
  active = &small;
  auto filled = make(with_max_tokens(100));
  r = run(*filled, std::vector<int32_t>(10, tok::ld));
  EXPECT_EQ(r.tokens.size(), 6u);
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].reason, finish_reason::length);
  EXPECT_EQ(r.results[0].completion_tokens, 6);
}

TEST_F(output_processor_test, held_back_text_ends_a_finished_answer_as_its_tail) {
  // An incomplete character: U+FFFD.
  auto cut = make(with_max_tokens(2));
  auto r = run(*cut, {tok::hel, tok::euro_head});
  EXPECT_EQ(r.text, "Hel" + replacement);
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].tail, replacement);
  // What could have begun a stop string.
  auto p = with_max_tokens(2);
  p.stop = {"ld!"};
  auto held = make(p);
  r = run(*held, {tok::wor, tok::ld});
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].tail, "ld");
  EXPECT_EQ(r.text, " world");
}

TEST_F(output_processor_test, a_sequence_ends_once_with_its_token_times) {
  auto p = with_max_tokens(10);
  p.stop = {"ld!"};
  auto s = make(p);
  emit(*s, tok::wor);
  emit(*s, tok::ld);
  step_output out;
  processor.finish(*s, outcome::cancelled, finish_reason::none, ec::cancelled, "request cancelled",
                   out);
  processor.finish(*s, outcome::failed, finish_reason::none, ec::model_failure, "later", out);
  ASSERT_EQ(out.results.size(), 1u);
  EXPECT_EQ(out.results[0].how, outcome::cancelled);
  EXPECT_EQ(out.results[0].code, ec::cancelled);
  EXPECT_EQ(out.results[0].message, "request cancelled");
  EXPECT_EQ(out.results[0].tail, "");  // only a finished answer gets what was held back
  EXPECT_EQ(out.results[0].completion_tokens, 2);
  EXPECT_EQ(out.results[0].prompt_tokens, 2);
  EXPECT_EQ(out.results[0].times.finished, clock_now);
  ASSERT_EQ(out.request_timings.size(), 1u);
  EXPECT_EQ(out.request_timings[0].token_times.size(), 2u);
  // Ended: further tokens change nothing.
  EXPECT_TRUE(s->ended);
}

TEST_F(output_processor_test, a_prompt_only_request_finishes_when_its_prompt_completes) {
  auto echo = make(with_max_tokens(0));
  step_output out;
  processor.complete_prompt(*echo, 777, out);
  ASSERT_EQ(out.results.size(), 1u);
  EXPECT_EQ(out.results[0].how, outcome::finished);
  EXPECT_EQ(out.results[0].reason, finish_reason::length);
  EXPECT_EQ(out.results[0].completion_tokens, 0);
  EXPECT_EQ(out.results[0].times.first_token, 777);
  EXPECT_TRUE(out.chunks.empty());  // no prompt log-probabilities asked for

  auto generating = make(with_max_tokens(5));
  step_output none;
  processor.complete_prompt(*generating, 777, none);
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE(generating->ended);
}

TEST_F(output_processor_test, prompt_logprobs_are_scored_chunk_by_chunk_from_the_right_rows) {
  auto p = with_max_tokens(0);
  p.logprobs = 1;
  p.prompt_logprobs = true;
  const std::vector<int32_t> prompt = {tok::bos, tok::hel, tok::lo, tok::bang};
  auto s = make(p, prompt);
  // Row r of the prompt scores token r + 1: that token's logit is 2, every other 0.
  std::vector<float> rows(prompt.size() * tok::vocab, 0.0f);
  for (size_t r = 0; r + 1 < prompt.size(); ++r) rows[r * tok::vocab + size_t(prompt[r + 1])] = 2;
  const double chosen = 2.0 - std::log(std::exp(2.0) + (tok::vocab - 1));
  // Two chunks of two tokens, each with its own rows.
  processor.score_prompt_chunk(*s, model::logits_view{rows.data(), 2, tok::vocab}, 0, 0, 2);
  processor.score_prompt_chunk(*s, model::logits_view{rows.data() + 2 * tok::vocab, 2, tok::vocab},
                               0, 2, 2);
  step_output out;
  processor.complete_prompt(*s, 777, out);
  ASSERT_EQ(out.chunks.size(), 1u);
  const auto& entries = out.chunks[0].prompt_logprobs;
  ASSERT_EQ(entries.size(), prompt.size());
  EXPECT_EQ(entries[0].chosen.token, tok::bos);
  EXPECT_TRUE(std::isnan(entries[0].chosen.logprob));  // the first token follows nothing
  EXPECT_TRUE(entries[0].top.empty());
  const std::vector<std::string> texts = {"", "Hel", "lo", "!"};
  for (size_t t = 1; t < prompt.size(); ++t) {
    EXPECT_EQ(entries[t].chosen.token, prompt[t]) << t;
    EXPECT_NEAR(entries[t].chosen.logprob, chosen, 1e-5) << t;
    EXPECT_EQ(entries[t].chosen.text, texts[t]) << t;
    ASSERT_EQ(entries[t].top.size(), 1u) << t;
    EXPECT_EQ(entries[t].top[0].token, prompt[t]) << t;
  }
  // max_tokens 0: the same output ends it.
  ASSERT_EQ(out.results.size(), 1u);
  EXPECT_EQ(out.results[0].reason, finish_reason::length);
}
