// The executor's scheduler on the real stories260K model: exact tokens alone and in batches,
// static batches, cancellation, deadlines and stop strings.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>

#include "model/causal_lm.hpp"
#include "pipeline/executor_core.hpp"
#include "tests/support/executor_runs.hpp"
#include "tests/support/model_files.hpp"
#include "tests/support/temp_dir.hpp"
#include "tokenizers/tokenizer.hpp"

using namespace conveyor;
using namespace conveyor::pipeline;

namespace {

using test::collect;
using test::run_result;

class executor_core_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = tokenizers::load_tokenizer(test::source_path("models/stories260K/tok512.model"));
    ASSERT_TRUE(tok) << message_of(tok.error());
    tokenizer = *tok;
    expected = test::load_expected_run();
  }

  // stories260K with `slots` KV-cache slots.
  static std::unique_ptr<model::causal_lm> load_stories(
      int32_t slots, model::llama_network network = model::llama_network::automatic) {
    model::runtime_options opt;
    opt.slots = slots;
    opt.network = network;
    auto m = model::load_model(test::stories_model(), opt);
    EXPECT_TRUE(m);
    return m ? std::move(*m) : nullptr;
  }

  std::unique_ptr<executor_core> make_core(
      int32_t slots, model::llama_network network = model::llama_network::automatic) {
    return std::make_unique<executor_core>("test", load_stories(slots, network), tokenizer);
  }

  sequence_request request(request_id id, const std::string& prompt, int32_t max_tokens) {
    sequence_request r;
    r.id = id;
    r.prompt = *tokenizer->encode(prompt, true);
    r.params.max_tokens = max_tokens;
    r.params.temperature = 0;
    r.times.arrival = now_stamp();
    return r;
  }

  // Steps until every request ended; collects each one's text and tokens.
  std::map<request_id, run_result> run(executor_core& core, int max_steps = 10000) {
    return test::run_until_idle(core, max_steps);
  }

  std::shared_ptr<const tokenizers::tokenizer> tokenizer;
  test::expected_run expected;
  const std::string story_prompt = "Once upon a time";
};

const std::vector<std::string> other_prompts = {
    "Tom had a red ball.",
    "The cat",
    "One day, a big dog ran to the park and saw a bird.",
    "Lily and Ben were friends. They liked to play in the garden with their toys every day.",
    "Sue",
    "The sun was hot and the sky was blue. A little boy",
    "Mom said no."};

}  // namespace

TEST_F(executor_core_test, alone_gives_the_expected_story) {
  auto core = make_core(1);
  step_output admitted;
  core->admit({request(1, story_prompt, 60)}, false, admitted);
  EXPECT_TRUE(admitted.results.empty());
  auto out = run(*core);
  EXPECT_EQ(out[1].tokens, expected.generated());
  // The .txt ends with the newline run.c prints after generating.
  EXPECT_EQ(story_prompt + out[1].text + "\n", expected.text);
  EXPECT_EQ(out[1].result.how, outcome::finished);
  EXPECT_EQ(out[1].result.reason, finish_reason::length);
  EXPECT_EQ(out[1].result.prompt_tokens, 5);
  EXPECT_EQ(out[1].result.completion_tokens, 60);
}

TEST_F(executor_core_test, static_batch_pads_and_keeps_rows_until_all_end) {
  auto core = make_core(8);
  std::vector<sequence_request> batch;
  for (size_t i = 0; i < other_prompts.size(); ++i)
    batch.push_back(request(10 + i, other_prompts[i], 5 + int32_t(i) * 3));
  batch.push_back(request(1, story_prompt, 60));
  step_output admitted;
  core->admit(batch, true, admitted);
  EXPECT_EQ(core->free_slots(), 0);
  std::map<request_id, run_result> out;
  auto first = core->step();
  ASSERT_EQ(first.step_timings.size(), 1u);
  EXPECT_EQ(first.step_timings[0].kind, step_kind::prefill);
  EXPECT_EQ(first.step_timings[0].batch_size, 8u);
  // Padded to the longest prompt: more tokens computed than real ones.
  EXPECT_GT(first.step_timings[0].padded_tokens, first.step_timings[0].tokens);
  collect(first, out);
  bool saw_ghost_rows = false;
  while (core->has_work()) {
    auto s = core->step();
    for (auto& t : s.step_timings) saw_ghost_rows |= t.padded_tokens > t.tokens;
    // No slot frees while any member runs.
    if (core->has_work()) {
      EXPECT_EQ(core->free_slots(), 0);
    }
    collect(s, out);
  }
  EXPECT_TRUE(saw_ghost_rows);
  EXPECT_EQ(core->free_slots(), 8);
  EXPECT_EQ(out[1].tokens, expected.generated());
  for (auto& [id, r] : out) EXPECT_EQ(r.result.how, outcome::finished) << id;
}

TEST_F(executor_core_test, continuous_joins_keep_every_answer_exact) {
  // Each prompt alone first.
  std::map<request_id, run_result> alone;
  std::vector<sequence_request> all;
  all.push_back(request(1, story_prompt, 60));
  for (size_t i = 0; i < other_prompts.size(); ++i)
    all.push_back(request(10 + i, other_prompts[i], 4 + int32_t(i) * 5));
  for (auto& r : all) {
    auto core = make_core(1);
    step_output ignored;
    core->admit({r}, false, ignored);
    alone[r.id] = run(*core)[r.id];
  }
  // Then joining one by one, every other step, into 3 slots.
  auto core = make_core(3);
  std::map<request_id, run_result> mixed;
  size_t next = 0;
  for (int step = 0; step < 2000 && (core->has_work() || next < all.size()); ++step) {
    if (step % 2 == 0 && next < all.size() && core->free_slots() > 0) {
      step_output admitted;
      core->admit({all[next++]}, false, admitted);
      collect(admitted, mixed);
    }
    collect(core->step(), mixed);
  }
  ASSERT_EQ(mixed.size(), all.size());
  for (auto& r : all) {
    EXPECT_EQ(mixed[r.id].tokens, alone[r.id].tokens) << "request " << r.id;
    EXPECT_EQ(mixed[r.id].text, alone[r.id].text) << "request " << r.id;
  }
  EXPECT_EQ(mixed[1].tokens, expected.generated());
}

// The choices of a request with n > 1: equal prompts admitted together share one prefill, on
// both networks, and each continues exactly as it would alone (its cache rows were copied).
TEST_F(executor_core_test, equal_prompts_share_one_prefill_and_each_continues_as_alone) {
  for (auto network : {model::llama_network::loops, model::llama_network::torch_ops}) {
    SCOPED_TRACE(network == model::llama_network::loops ? "loops" : "torch_ops");
    // Greedy: four equal choices, each run.c's story.
    auto core = make_core(6, network);
    std::vector<sequence_request> choices;
    for (request_id id = 1; id <= 4; ++id) choices.push_back(request(id, story_prompt, 60));
    step_output admitted;
    core->admit(choices, false, admitted);
    std::map<request_id, run_result> out;
    auto first = core->step();
    ASSERT_EQ(first.step_timings.size(), 1u);
    EXPECT_EQ(first.step_timings[0].kind, step_kind::prefill);
    // One row computed: the prompt's 5 tokens once, not four times.
    EXPECT_EQ(first.step_timings[0].batch_size, 1u);
    EXPECT_EQ(first.step_timings[0].tokens, 5u);
    EXPECT_EQ(first.step_timings[0].padded_tokens, 5u);
    collect(first, out);
    for (int i = 0; i < 1000 && core->has_work(); ++i) collect(core->step(), out);
    for (request_id id = 1; id <= 4; ++id) {
      EXPECT_EQ(out[id].tokens, expected.generated()) << "choice " << id;
      EXPECT_EQ(out[id].result.how, outcome::finished) << "choice " << id;
    }
    EXPECT_EQ(core->free_slots(), 6);

    // Sampled: choice i with seed 7 + i equals the same request sent alone with that seed.
    auto sampled = [&](request_id id) {
      auto r = request(id, story_prompt, 40);
      r.params.temperature = 1.0f;
      r.params.seed = 7 + id;
      return r;
    };
    std::map<request_id, run_result> alone;
    for (request_id id = 0; id < 4; ++id) {
      auto single = make_core(1, network);
      step_output ignored;
      single->admit({sampled(id)}, false, ignored);
      alone[id] = run(*single)[id];
    }
    // With another prompt in the same step, so that the shared row is not the only one.
    std::vector<sequence_request> mixed{request(100, other_prompts[0], 10)};
    for (request_id id = 0; id < 4; ++id) mixed.push_back(sampled(id));
    auto shared = make_core(6, network);
    shared->admit(mixed, false, admitted);
    auto together = run(*shared);
    std::set<std::vector<int32_t>> distinct;
    for (request_id id = 0; id < 4; ++id) {
      EXPECT_EQ(together[id].tokens, alone[id].tokens) << "choice " << id;
      EXPECT_EQ(together[id].text, alone[id].text) << "choice " << id;
      distinct.insert(together[id].tokens);
    }
    // Different seeds drew different stories: the choices did not share a generator.
    EXPECT_GT(distinct.size(), 1u);
  }
}

TEST_F(executor_core_test, cancel_frees_the_slot_at_the_next_step) {
  auto core = make_core(1);
  step_output ignored;
  core->admit({request(1, story_prompt, 200)}, false, ignored);
  core->step();
  core->step();
  EXPECT_EQ(core->free_slots(), 0);
  EXPECT_TRUE(core->cancel(1));
  EXPECT_FALSE(core->cancel(99));
  auto s = core->step();
  ASSERT_EQ(s.results.size(), 1u);
  EXPECT_EQ(s.results[0].how, outcome::cancelled);
  EXPECT_EQ(s.results[0].code, ec::cancelled);
  EXPECT_EQ(s.results[0].completion_tokens, 2);
  EXPECT_EQ(core->free_slots(), 1);
  EXPECT_FALSE(core->has_work());
}

TEST_F(executor_core_test, a_static_batch_cancelled_before_its_first_step_returns_its_slots) {
  auto core = make_core(2);
  step_output ignored;
  core->admit({request(1, story_prompt, 5), request(2, "The cat", 5)}, true, ignored);
  EXPECT_TRUE(core->cancel(1));
  EXPECT_TRUE(core->cancel(2));
  auto s = core->step();
  ASSERT_EQ(s.results.size(), 2u);
  EXPECT_EQ(s.results[0].how, outcome::cancelled);
  EXPECT_EQ(s.results[1].how, outcome::cancelled);
  EXPECT_FALSE(core->has_work());
  EXPECT_EQ(core->free_slots(), 2) << "the slots of a batch that never ran must come back";
  // And the executor still serves: a new batch of two gets both slots.
  std::map<request_id, run_result> out;
  core->admit({request(3, story_prompt, 60), request(4, "The cat", 3)}, true, ignored);
  EXPECT_TRUE(ignored.results.empty()) << ignored.results.front().message;
  out = run(*core);
  EXPECT_EQ(out[3].tokens, expected.generated());
  EXPECT_EQ(core->free_slots(), 2);
}

TEST_F(executor_core_test, a_static_member_expired_before_its_first_step_returns_its_slot) {
  stamp fake_now = 1'000'000'000;
  auto core = make_core(2);
  core->set_clock([&] { return fake_now; });
  auto late = request(1, "The cat", 5);
  late.deadline = fake_now + 1;
  step_output ignored;
  core->admit({late, request(2, story_prompt, 60)}, true, ignored);
  fake_now += 1;  // the deadline passes before the batch's first step
  std::map<request_id, run_result> out = run(*core);
  EXPECT_EQ(out[1].result.how, outcome::expired);
  EXPECT_EQ(out[1].result.completion_tokens, 0);
  EXPECT_EQ(out[2].tokens, expected.generated());
  EXPECT_FALSE(core->has_work());
  EXPECT_EQ(core->free_slots(), 2);
}

TEST_F(executor_core_test, deadline_expires_at_a_step_boundary) {
  // Time is the test's: it moves only when the test moves it, however fast the machine is.
  stamp fake_now = 1'000'000'000;
  auto core = make_core(2);
  core->set_clock([&] { return fake_now; });
  auto r = request(1, story_prompt, 200);
  r.deadline = fake_now + 200'000'000;  // 200 ms
  step_output ignored;
  core->admit({r, request(2, "The cat", 3)}, false, ignored);
  std::map<request_id, run_result> out;
  for (int i = 0; i < 3; ++i) {
    collect(core->step(), out);
    fake_now += 50'000'000;
  }
  // 150 ms have passed: not yet.
  EXPECT_EQ(out[1].result.id, 0u) << "request 1 must not have ended yet";
  fake_now += 49'999'999;
  auto before = core->step();
  collect(before, out);
  EXPECT_TRUE(before.results.empty()) << "one nanosecond before its deadline request 1 runs on";
  fake_now += 1;
  auto s = core->step();
  collect(s, out);
  ASSERT_EQ(s.results.size(), 1u);
  EXPECT_EQ(s.results[0].id, 1u);
  EXPECT_EQ(s.results[0].how, outcome::expired);
  EXPECT_EQ(s.results[0].code, ec::expired);
  EXPECT_EQ(s.results[0].completion_tokens, 4);
  EXPECT_EQ(s.results[0].message, "deadline passed after 4 tokens");
  EXPECT_EQ(s.results[0].times.finished, fake_now);
  EXPECT_EQ(out[2].result.how, outcome::finished);
  EXPECT_FALSE(core->has_work());
}

TEST_F(executor_core_test, stop_string_ends_before_it) {
  auto core = make_core(1);
  auto r = request(1, story_prompt, 60);
  r.params.stop = {"Lily"};
  step_output ignored;
  core->admit({r}, false, ignored);
  auto out = run(*core);
  // The story's first "Lily" comes after ", there was a little girl named ".
  EXPECT_EQ(out[1].text, ", there was a little girl named ");
  EXPECT_EQ(out[1].result.reason, finish_reason::stop);
}

TEST_F(executor_core_test, end_token_finishes_with_stop) {
  // stories260K ends a story with BOS: a long enough greedy run ends by itself.
  auto core = make_core(1);
  core->admit({request(1, story_prompt, 400)}, false, *std::make_unique<step_output>());
  auto out = run(*core);
  EXPECT_EQ(out[1].result.reason, finish_reason::stop);
  EXPECT_LT(out[1].result.completion_tokens, 400);
  for (auto t : out[1].tokens) EXPECT_NE(t, 1);
}

TEST_F(executor_core_test, a_model_directory_ends_on_its_own_end_ids) {
  // stories260K in the Hugging Face layout, whose generation_config.json names as its only end id
  // the fourth distinct token of the expected story: the run stops there, not on BOS.
  test::temp_dir folder{"conveyor_end_ids"};
  folder.copy_files_of(test::source_path("tests/fixtures/hf_models/stories260K"));
  const std::string dir = folder.path();
  const auto story = expected.generated();
  std::vector<int32_t> seen;
  for (auto t : story)
    if (std::find(seen.begin(), seen.end(), t) == seen.end()) seen.push_back(t);
  ASSERT_GE(seen.size(), 4u);
  const int32_t end = seen[3];
  std::ofstream(folder.file("generation_config.json"), std::ios::trunc)
      << "{\"eos_token_id\": [" << end << "]}";
  model::runtime_options opt;
  opt.slots = 1;
  auto m = model::load_model(dir, opt);
  ASSERT_TRUE(m) << message_of(m.error());
  executor_core core{"test", std::move(*m), tokenizer};
  step_output admitted;
  core.admit({request(1, story_prompt, 60)}, false, admitted);
  auto out = run(core);
  const auto stop_at = std::find(story.begin(), story.end(), end) - story.begin();
  EXPECT_EQ(out[1].result.reason, finish_reason::stop);
  EXPECT_EQ(out[1].tokens, std::vector<int32_t>(story.begin(), story.begin() + stop_at));
}

// -- chunked prefill ----------------------------------------------------------------------------

namespace {

// A prompt of more than 256 tokens: its later chunks attend through the matrix-product path of
// the loops network (rows_attention_limit), with start > 0.
std::string long_prompt() {
  std::string p;
  for (int i = 0; i < 5; ++i)
    for (const auto& s : other_prompts) p += s + " ";
  return p + "Once upon a time";
}

}  // namespace

// Prompts cut into chunks of a few tokens give exactly the tokens of whole prompts, on both
// networks, whether they arrive together or join sequences that are decoding.
TEST_F(executor_core_test, chunked_prefill_gives_the_tokens_of_whole_prompts) {
  for (auto network : {model::llama_network::loops, model::llama_network::torch_ops}) {
    SCOPED_TRACE(network == model::llama_network::loops ? "loops" : "torch_ops");
    std::vector<sequence_request> all;
    all.push_back(request(1, story_prompt, 60));
    for (size_t i = 0; i < other_prompts.size(); ++i)
      all.push_back(request(10 + i, other_prompts[i], 6 + int32_t(i) * 4));
    all.push_back(request(99, long_prompt(), 20));
    ASSERT_GT(all.back().prompt.size(), 300u);
    // Whole prompts, all in the first step.
    auto whole_core = make_core(int32_t(all.size()), network);
    step_output ignored;
    whole_core->admit(all, false, ignored);
    auto whole = run(*whole_core);
    EXPECT_EQ(whole[1].tokens, expected.generated());
    for (int32_t chunk : {1, 3, 7}) {
      SCOPED_TRACE("chunks of " + std::to_string(chunk));
      step_plan_options o;
      o.max_prompt_tokens = chunk;
      o.min_prompt_tokens = 1;
      // Together: the prompts are prefilled one chunk per step, in order.
      auto together_core = make_core(int32_t(all.size()), network);
      together_core->set_step_plan_options(o);
      together_core->admit(all, false, ignored);
      std::map<request_id, run_result> together;
      size_t steps = 0, most_prompt_tokens = 0;
      for (; steps < 20000 && together_core->has_work(); ++steps) {
        auto s = together_core->step();
        for (auto& t : s.step_timings) {
          // A step's tokens: its prompt tokens (at most the chunk) and one per running sequence.
          ASSERT_LE(t.padded_tokens, size_t(chunk) + all.size());
          most_prompt_tokens = std::max(most_prompt_tokens, t.padded_tokens);
        }
        collect(s, together);
      }
      size_t prompt_total = 0;
      for (auto& r : all) prompt_total += r.prompt.size();
      EXPECT_GE(steps, prompt_total / size_t(chunk));
      // Joining one by one, every third step, into 3 slots.
      auto joining_core = make_core(3, network);
      joining_core->set_step_plan_options(o);
      std::map<request_id, run_result> joining;
      size_t next = 0;
      for (int step = 0; step < 40000 && (joining_core->has_work() || next < all.size()); ++step) {
        if (step % 3 == 0 && next < all.size() && joining_core->free_slots() > 0) {
          step_output admitted;
          joining_core->admit({all[next++]}, false, admitted);
          collect(admitted, joining);
        }
        collect(joining_core->step(), joining);
      }
      ASSERT_EQ(together.size(), all.size());
      ASSERT_EQ(joining.size(), all.size());
      for (auto& r : all) {
        EXPECT_EQ(together[r.id].tokens, whole[r.id].tokens) << "request " << r.id;
        EXPECT_EQ(together[r.id].text, whole[r.id].text) << "request " << r.id;
        EXPECT_EQ(together[r.id].result.how, outcome::finished) << "request " << r.id;
        EXPECT_EQ(together[r.id].result.completion_tokens, whole[r.id].result.completion_tokens);
        EXPECT_EQ(joining[r.id].tokens, whole[r.id].tokens) << "request " << r.id;
        EXPECT_EQ(joining[r.id].text, whole[r.id].text) << "request " << r.id;
      }
    }
  }
}

// Running sequences keep decoding while a long prompt is prefilled in chunks: each step has a
// row for every running sequence, and the long prompt's first token comes several steps later.
TEST_F(executor_core_test, running_sequences_decode_every_step_while_a_prompt_is_chunked) {
  auto core = make_core(3);
  step_plan_options o;
  o.max_prompt_tokens = 16;
  o.min_prompt_tokens = 1;
  o.target_ms = 1e9;  // the cap alone bounds the chunks, whatever the steps cost
  core->set_step_plan_options(o);
  step_output ignored;
  core->admit({request(1, story_prompt, 60), request(2, other_prompts[0], 60)}, false, ignored);
  std::map<request_id, run_result> out;
  collect(core->step(), out);  // both prompts (5 + 7 tokens) fit in one step
  ASSERT_EQ(out[1].tokens.size(), 1u);
  ASSERT_EQ(out[2].tokens.size(), 1u);
  auto long_request = request(3, long_prompt(), 5);
  const size_t n = long_request.prompt.size();
  core->admit({long_request}, false, ignored);
  size_t steps = 0;
  while (out[3].tokens.empty() && steps < 100) {
    auto s = core->step();
    ++steps;
    ASSERT_EQ(s.step_timings.size(), 1u);
    // Two decode rows and a chunk of at most 16 prompt tokens.
    EXPECT_EQ(s.step_timings[0].batch_size, 3u);
    EXPECT_LE(s.step_timings[0].padded_tokens, 16u + 2u);
    collect(s, out);
    EXPECT_EQ(out[1].tokens.size(), 1 + steps);
    EXPECT_EQ(out[2].tokens.size(), 1 + steps);
  }
  EXPECT_EQ(steps, (n + 15) / 16);
  auto rest = run(*core);
  for (auto& [id, r] : rest) {
    out[id].tokens.insert(out[id].tokens.end(), r.tokens.begin(), r.tokens.end());
    out[id].result = r.result;
  }
  EXPECT_EQ(out[1].tokens, expected.generated());
  EXPECT_EQ(out[3].result.completion_tokens, 5);
  EXPECT_EQ(core->free_slots(), 3);
}

// The choices of a request with n > 1 share one prefill when it is chunked too: only the first
// computes the prompt, chunk by chunk; the others copy it when it completes.
TEST_F(executor_core_test, equal_prompts_share_a_chunked_prefill) {
  for (auto network : {model::llama_network::loops, model::llama_network::torch_ops}) {
    SCOPED_TRACE(network == model::llama_network::loops ? "loops" : "torch_ops");
    auto core = make_core(4, network);
    step_plan_options o;
    o.max_prompt_tokens = 2;
    o.min_prompt_tokens = 1;
    core->set_step_plan_options(o);
    std::vector<sequence_request> choices;
    for (request_id id = 1; id <= 3; ++id) choices.push_back(request(id, story_prompt, 60));
    step_output ignored;
    core->admit(choices, false, ignored);
    std::map<request_id, run_result> out;
    // 5 prompt tokens in chunks of 2: three steps of one row each, the prompt computed once.
    for (int i = 0; i < 3; ++i) {
      auto s = core->step();
      ASSERT_EQ(s.step_timings.size(), 1u);
      EXPECT_EQ(s.step_timings[0].batch_size, 1u);
      EXPECT_EQ(s.step_timings[0].padded_tokens, i < 2 ? 2u : 1u);
      collect(s, out);
    }
    for (request_id id = 1; id <= 3; ++id) EXPECT_EQ(out[id].tokens.size(), 1u) << id;
    for (int i = 0; i < 1000 && core->has_work(); ++i) collect(core->step(), out);
    for (request_id id = 1; id <= 3; ++id) EXPECT_EQ(out[id].tokens, expected.generated()) << id;
  }
}

// A sequence cancelled half-way through its chunked prefill ends once and frees its slot; the
// prompt behind it then gets its turn.
TEST_F(executor_core_test, a_prompt_cancelled_between_chunks_frees_its_slot) {
  auto core = make_core(2);
  step_plan_options o;
  o.max_prompt_tokens = 4;
  o.min_prompt_tokens = 1;
  core->set_step_plan_options(o);
  step_output ignored;
  core->admit({request(1, long_prompt(), 10), request(2, story_prompt, 60)}, false, ignored);
  std::map<request_id, run_result> out;
  collect(core->step(), out);
  collect(core->step(), out);
  EXPECT_EQ(core->free_slots(), 0);
  EXPECT_TRUE(core->cancel(1));
  auto s = core->step();
  collect(s, out);
  EXPECT_EQ(out[1].result.how, outcome::cancelled);
  EXPECT_EQ(core->free_slots(), 1);
  EXPECT_TRUE(out[1].tokens.empty());
  auto rest = run(*core);
  EXPECT_EQ(out[2].tokens.size() + rest[2].tokens.size(), expected.generated().size());
  EXPECT_EQ(rest.count(1), 0u);  // ended exactly once
  EXPECT_EQ(core->free_slots(), 2);
}

namespace {

// The real model behind another: every call goes to it, unless a subclass says otherwise.
class forwarding_model : public model::causal_lm {
 public:
  explicit forwarding_model(std::unique_ptr<model::causal_lm> inner) : inner_(std::move(inner)) {}
  const model::llama_shape& shape() const override { return inner_->shape(); }
  int32_t slots() const override { return inner_->slots(); }
  int32_t context() const override { return inner_->context(); }
  bool ignores_end_tokens() const override { return inner_->ignores_end_tokens(); }
  model::logits_view prefill(const std::vector<model::prefill_item>& items) override {
    return inner_->prefill(items);
  }
  model::logits_view decode(const std::vector<model::decode_item>& items) override {
    return inner_->decode(items);
  }
  std::string describe() const override { return inner_->describe(); }
  int32_t block_size() const override { return inner_->block_size(); }
  int32_t kv_blocks() const override { return inner_->kv_blocks(); }
  void copy_block(int32_t from, int32_t to) override { inner_->copy_block(from, to); }
  int64_t kv_cache_bytes() const override { return inner_->kv_cache_bytes(); }

 private:
  std::unique_ptr<model::causal_lm> inner_;
};

// The real model, whose steps take fake time on a clock the test reads: `fixed_ms` a step,
// `row_ms` per decode row (an item of one token at a position past 0) and `token_ms` per prompt
// token.
class timed_model final : public forwarding_model {
 public:
  timed_model(std::unique_ptr<model::causal_lm> inner, stamp& now, double fixed_ms, double row_ms,
              double token_ms)
      : forwarding_model(std::move(inner)),
        now_(now),
        fixed_(fixed_ms),
        row_(row_ms),
        token_(token_ms) {}
  model::logits_view prefill(const std::vector<model::prefill_item>& items) override {
    double ms = fixed_;
    for (const auto& it : items) ms += it.count == 1 && it.start > 0 ? row_ : token_ * it.count;
    now_ += stamp(ms * 1e6);
    return forwarding_model::prefill(items);
  }

 private:
  stamp& now_;
  double fixed_, row_, token_;
};

}  // namespace

// The planner's budget comes from the executor's own measured steps, on its clock: steps of
// 2 ms + 1 ms per decode row + 0.45 ms per prompt token. With two sequences decoding (4 ms), one
// prompt waiting and the ratio 1.5, a step may take 4 x (1 + 0.5 x 3 / 2) = 7 ms: 3 ms for
// prompt tokens, 6 of them (2.7 ms).
TEST_F(executor_core_test, the_prompt_budget_follows_the_measured_step_costs) {
  stamp fake_now = 1'000'000'000;
  executor_core core{
      "test", std::make_unique<timed_model>(load_stories(3), fake_now, 2.0, 1.0, 0.45), tokenizer};
  core.set_clock([&] { return fake_now; });
  step_plan_options o;
  o.target_ratio = 1.5;
  o.min_prompt_tokens = 1;
  core.set_step_plan_options(o);
  step_output ignored;
  // Both keep decoding through the test: no end token ends them.
  auto a = request(1, story_prompt, 200), b = request(2, other_prompts[0], 200);
  a.params.ignore_eos = b.params.ignore_eos = true;
  core.admit({a, b}, false, ignored);
  for (int i = 0; i < 5; ++i) core.step();  // one prefill (nothing decodes: no budget), 4 decodes
  core.admit({request(3, long_prompt(), 3)}, false, ignored);
  std::vector<size_t> prompt_tokens;
  for (int i = 0; i < 30; ++i) {
    auto s = core.step();
    ASSERT_EQ(s.step_timings.size(), 1u);
    prompt_tokens.push_back(s.step_timings[0].padded_tokens - 2);
  }
  // The first chunk is planned before any mixed step was seen (the prompt-token cost is then
  // inferred from the one prefill); from the second on the fit is exact.
  for (size_t i = 1; i < prompt_tokens.size(); ++i) EXPECT_EQ(prompt_tokens[i], 6u) << "step " << i;
  const auto& c = core.step_costs().fitted();
  EXPECT_NEAR(c.fixed_ms, 2.0, 0.05);
  EXPECT_NEAR(c.per_row_ms, 1.0, 0.05);
  EXPECT_NEAR(c.per_token_ms, 0.45, 0.001);
  EXPECT_NEAR(c.per_kilo_attended_ms, 0.0, 0.01);
}

TEST_F(executor_core_test, a_prompt_without_tokens_is_refused_at_admission) {
  auto core = make_core(2);
  auto empty = request(1, story_prompt, 5);
  empty.prompt.clear();
  step_output admitted;
  core->admit({empty, request(2, story_prompt, 60)}, false, admitted);
  ASSERT_EQ(admitted.results.size(), 1u);
  EXPECT_EQ(admitted.results[0].id, 1u);
  EXPECT_EQ(admitted.results[0].how, outcome::failed);
  EXPECT_EQ(admitted.results[0].code, ec::bad_request);
  EXPECT_EQ(admitted.results[0].message, "the prompt has no tokens");
  EXPECT_EQ(core->free_slots(), 1);
  auto out = run(*core);
  EXPECT_EQ(out[2].tokens, expected.generated());
  EXPECT_EQ(out.count(1), 0u);
}

namespace {

// The real model, which throws from its next forward pass when told to (as a CUDA out-of-memory
// or any torch error would).
class failing_model final : public forwarding_model {
 public:
  using forwarding_model::forwarding_model;
  bool fail_next = false;
  model::logits_view prefill(const std::vector<model::prefill_item>& items) override {
    if (fail_next) {
      fail_next = false;
      throw std::runtime_error("out of memory");
    }
    return forwarding_model::prefill(items);
  }
};

}  // namespace

// A step whose model throws, with a cancellation and a deadline at the same boundary: every
// request ends exactly once, with its own outcome (the cancelled one cancelled, the expired one
// expired, the running and the waiting ones failed with the model's error), every slot comes
// back, and the executor takes new work afterwards.
TEST_F(executor_core_test, a_model_error_ends_every_request_exactly_once) {
  stamp fake_now = 1'000'000'000;
  auto owned = std::make_unique<failing_model>(load_stories(5));
  failing_model* failing = owned.get();
  executor_core core{"test", std::move(owned), tokenizer};
  core.set_clock([&] { return fake_now; });
  std::map<request_id, std::vector<request_result>> ended;
  auto count = [&](const step_output& out) {
    for (const auto& r : out.results) ended[r.id].push_back(r);
  };
  step_output admitted;
  auto cancelled = request(1, story_prompt, 50), expired = request(2, other_prompts[0], 50),
       running = request(3, other_prompts[1], 50);
  expired.deadline = fake_now + 1'000'000;
  for (auto* r : {&cancelled, &expired, &running}) r->params.ignore_eos = true;
  core.admit({cancelled, expired, running}, false, admitted);
  count(admitted);
  for (int i = 0; i < 3; ++i) count(core.step());
  ASSERT_TRUE(ended.empty());
  // The fourth arrives; its prompt waits for the failing step.
  step_output late;
  core.admit({request(4, other_prompts[2], 50)}, false, late);
  count(late);
  EXPECT_TRUE(core.cancel(1));
  fake_now += 1'000'000;
  failing->fail_next = true;
  step_output failed;
  ASSERT_NO_THROW(failed = core.step());
  count(failed);
  ASSERT_EQ(ended.size(), 4u);
  for (const auto& [id, results] : ended) EXPECT_EQ(results.size(), 1u) << "request " << id;
  EXPECT_EQ(ended[1][0].how, outcome::cancelled);
  EXPECT_EQ(ended[2][0].how, outcome::expired);
  for (request_id id : {3u, 4u}) {
    EXPECT_EQ(ended[id][0].how, outcome::failed) << "request " << id;
    EXPECT_EQ(ended[id][0].code, ec::model_failure) << "request " << id;
    EXPECT_EQ(ended[id][0].message, "the model failed: out of memory") << "request " << id;
  }
  EXPECT_EQ(failed.failure, "out of memory");
  EXPECT_FALSE(core.has_work());
  EXPECT_EQ(core.free_slots(), 5);
  // Nothing is heard of them again, and the executor serves the next request as if alone.
  EXPECT_TRUE(core.step().results.empty());
  step_output next;
  core.admit({request(5, story_prompt, 60)}, false, next);
  auto out = run(core);
  EXPECT_EQ(out[5].tokens, expected.generated());
  EXPECT_EQ(out.count(1) + out.count(2) + out.count(3) + out.count(4), 0u);
}

namespace {

// What a request produced, for comparing two runs bit for bit: tokens, and every logprob and
// alternative.
struct produced {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  bool operator==(const produced& o) const { return tokens == o.tokens && logprobs == o.logprobs; }
};

produced gather(const std::vector<step_output>& steps, request_id id) {
  produced p;
  for (const auto& s : steps)
    for (const auto& c : s.chunks) {
      if (c.id != id) continue;
      p.tokens.insert(p.tokens.end(), c.tokens.begin(), c.tokens.end());
      for (const auto& lp : c.logprobs) {
        p.logprobs.push_back(lp.chosen.logprob);
        for (const auto& alt : lp.top) p.logprobs.push_back(alt.logprob);
      }
    }
  return p;
}

// The stories260K executor with `slots` slots, `kv_blocks` blocks of 16 (0: slots x context)
// and prefix caching on or off.
std::unique_ptr<executor_core> stories_core(std::shared_ptr<const tokenizers::tokenizer> tok,
                                            int32_t slots, int32_t kv_blocks, bool caching) {
  model::runtime_options opt;
  opt.slots = slots;
  opt.kv_blocks = kv_blocks;
  auto m = model::load_model(test::stories_model(), opt);
  EXPECT_TRUE(m);
  return std::make_unique<executor_core>("test", std::move(*m), std::move(tok), caching);
}

// Runs `requests` admitted together to their ends; every step's output.
std::vector<step_output> run_all(executor_core& core, std::vector<sequence_request> requests) {
  std::vector<step_output> steps(1);
  core.admit(std::move(requests), false, steps[0]);
  while (core.has_work()) steps.push_back(core.step());
  return steps;
}

}  // namespace

// A request whose prompt begins with blocks an earlier request left in the prefix cache gives
// the very tokens and log-probabilities (sampled at temperature 1 with a seed, every position's
// top 5) of the same request on a cold cache and with caching off; it reports the prompt tokens
// it found cached.
TEST_F(executor_core_test, a_request_from_the_prefix_cache_gives_the_bits_of_a_cold_one) {
  auto with = [&](request_id id, const std::string& text) {
    auto r = request(id, text, 40);
    r.params.temperature = 1.0f;
    r.params.seed = 77;
    r.params.logprobs = 5;
    return r;
  };
  const std::string shared =
      "Lily and Ben were friends. They liked to play in the garden with their toys every day. "
      "One day they found a big box under a tree.";
  const std::string question = shared + " Ben said";
  auto off = stories_core(tokenizer, 4, 0, false);
  const auto cold_off = gather(run_all(*off, {with(1, question)}), 1);
  ASSERT_EQ(cold_off.tokens.size(), 40u);

  auto on = stories_core(tokenizer, 4, 0, true);
  const auto first = run_all(*on, {with(1, question)});
  EXPECT_EQ(gather(first, 1), cold_off) << "a cold cache";
  // Another request with the same beginning, then the same request again.
  run_all(*on, {with(2, shared + " Lily ran")});
  const auto again = run_all(*on, {with(3, question)});
  EXPECT_EQ(gather(again, 3), cold_off) << "from the prefix cache";
  request_result result;
  for (const auto& s : again)
    for (const auto& r : s.results)
      if (r.id == 3) result = r;
  const auto prompt_tokens = int32_t(tokenizer->encode(question, true)->size());
  EXPECT_EQ(result.prompt_tokens, prompt_tokens);
  EXPECT_EQ(result.cache_queried_tokens, prompt_tokens);
  EXPECT_GT(result.cached_tokens, 16);
  EXPECT_LT(result.cached_tokens, prompt_tokens);
  EXPECT_EQ(result.cached_tokens % 16, 0);
  EXPECT_GT(on->kv_blocks().cached_blocks(), 0);
  EXPECT_EQ(on->kv_blocks().used_blocks(), 0) << "every block released at the end";
  // The last step's gauges say so too (what /metrics shows once the server is idle).
  const auto& last = again.back().step_timings;
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].kv_blocks_used, 0);
  EXPECT_EQ(last[0].kv_blocks_cached, on->kv_blocks().cached_blocks());
  EXPECT_EQ(last[0].kv_blocks_free, on->kv_blocks().num_blocks());
}

// A pool of one context's blocks (stories260K: 512 tokens, 32 blocks) under six requests that
// together need far more: sequences wait for blocks and are preempted, yet every request
// finishes with the very tokens it gives alone on a pool of its own, nothing fails, and every
// block comes back.
TEST_F(executor_core_test, a_pool_smaller_than_the_load_gives_each_request_its_own_tokens) {
  std::vector<sequence_request> requests;
  std::map<request_id, std::vector<int32_t>> alone;
  for (request_id id = 1; id <= 6; ++id) {
    const std::string text = other_prompts[size_t(id)];
    auto r = request(id, text, 200);
    r.params.temperature = 1.0f;
    r.params.seed = 100 + id;
    r.params.ignore_eos = true;
    requests.push_back(r);
    auto own = stories_core(tokenizer, 1, 0, true);
    alone[id] = gather(run_all(*own, {r}), id).tokens;
    ASSERT_EQ(alone[id].size(), 200u);
  }
  auto small = stories_core(tokenizer, 6, 32, true);
  const auto steps = run_all(*small, requests);
  int ended = 0;
  for (const auto& s : steps)
    for (const auto& r : s.results) {
      EXPECT_EQ(r.how, outcome::finished) << r.message;
      ++ended;
    }
  EXPECT_EQ(ended, 6);
  for (request_id id = 1; id <= 6; ++id) EXPECT_EQ(gather(steps, id).tokens, alone[id]) << id;
  // Preemptions happened: more tokens were computed than the prompts and the 199 fed tokens of
  // each request, and the pool ran dry.
  size_t computed = 0, prompts = 0;
  int32_t least_free = 32;
  for (const auto& s : steps)
    for (const auto& t : s.step_timings) {
      computed += t.padded_tokens;
      least_free = std::min(least_free, t.kv_blocks_free);
    }
  for (const auto& r : requests) prompts += r.prompt.size();
  EXPECT_GT(computed, prompts + 6 * 199);
  EXPECT_EQ(least_free, 0);
  EXPECT_EQ(small->kv_blocks().used_blocks(), 0);
  EXPECT_EQ(small->kv_blocks().free_blocks(), 32);
}
