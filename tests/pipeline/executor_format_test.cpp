// Output formats on the real stories260K model, sampled at temperature 1 over many seeds so that
// only the mask can make the outputs fit: regexes checked by std::regex, JSON by nlohmann-json and
// the schema's rules, choices by the list; the sequence ends ("stop") when the format is
// complete, with or without end tokens; n sequences of one prompt through the prefix cache; a
// constraint that arrives uncompiled (from a remote batcher) compiled by the executor.
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "grammar/grammar_compiler.hpp"
#include "model/causal_lm.hpp"
#include "pipeline/executor_core.hpp"
#include "tests/support/executor_runs.hpp"
#include "tests/support/model_files.hpp"
#include "tokenizers/tokenizer.hpp"

using namespace conveyor;
using namespace conveyor::pipeline;
using kind = sampling::structured_output::kind;

namespace {

using test::run_result;

class executor_format_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = tokenizers::load_tokenizer(test::source_path("models/stories260K/tok512.model"));
    ASSERT_TRUE(tok) << message_of(tok.error());
    tokenizer = *tok;
    compiler = std::make_shared<grammar::grammar_compiler>(*tokenizer, tokenizer->vocab_size());
  }

  std::unique_ptr<executor_core> make_core(int32_t slots, bool with_compiler = true) {
    model::runtime_options opt;
    opt.slots = slots;
    auto m = model::load_model(test::stories_model(), opt);
    EXPECT_TRUE(m);
    auto core = std::make_unique<executor_core>("test", std::move(*m), tokenizer);
    if (with_compiler) core->set_grammar_compiler(compiler);
    return core;
  }

  // A request of `format` at temperature 1 with `seed`, its format compiled as a tokenizer worker
  // compiles it (unless `compiled` is false: then it arrives as from another machine).
  sequence_request request(request_id id, sampling::structured_output format, uint64_t seed,
                           int32_t max_tokens = 200, bool compiled = true) {
    sequence_request r;
    r.id = id;
    r.prompt = *tokenizer->encode("Once upon a time", true);
    r.params.max_tokens = max_tokens;
    r.params.temperature = 1;
    r.params.seed = seed;
    format.field = "structured_outputs";
    r.params.constraint = std::move(format);
    if (compiled) {
      auto g = compiler->compile(r.params.constraint);
      EXPECT_TRUE(g) << message_of(g.error());
      r.grammar = *g;
    }
    r.times.arrival = now_stamp();
    return r;
  }

  std::map<request_id, run_result> run(executor_core& core, std::vector<sequence_request> reqs) {
    std::map<request_id, run_result> out;
    step_output admitted;
    core.admit(std::move(reqs), false, admitted);
    test::collect(admitted, out);
    for (int i = 0; i < 10000 && core.has_work(); ++i) test::collect(core.step(), out);
    return out;
  }

  static sampling::structured_output format(kind type, std::string text,
                                            std::vector<std::string> choices = {}) {
    sampling::structured_output c;
    c.type = type;
    c.text = std::move(text);
    c.choices = std::move(choices);
    return c;
  }

  std::shared_ptr<const tokenizers::tokenizer> tokenizer;
  std::shared_ptr<grammar::grammar_compiler> compiler;
};

TEST_F(executor_format_test, sampled_outputs_match_the_regex_and_stop_when_it_is_complete) {
  const std::string pattern = "(Tom|Lily) (is|was) [0-9]{1,2} years old\\.";
  auto core = make_core(24);
  std::vector<sequence_request> reqs;
  for (uint64_t seed = 0; seed < 24; ++seed)
    reqs.push_back(request(seed + 1, format(kind::regex, pattern), seed));
  auto out = run(*core, std::move(reqs));
  ASSERT_EQ(out.size(), 24u);
  std::set<std::string> texts;
  for (auto& [id, r] : out) {
    EXPECT_EQ(r.result.how, outcome::finished) << r.result.message;
    EXPECT_EQ(r.result.reason, finish_reason::stop) << id;
    EXPECT_TRUE(std::regex_match(r.text, std::regex{pattern})) << id << ": " << r.text;
    texts.insert(r.text);
  }
  // Temperature 1: the seeds give different fitting outputs, not one forced path.
  EXPECT_GE(texts.size(), 2u);
}

TEST_F(executor_format_test, masks_computed_while_the_model_runs_give_the_same_outputs) {
  // The masks of a step's sequences computed on the mask thread during the next forward pass:
  // the same tokens and ends as computed right after each token.
  const std::string pattern = "(Tom|Lily) (is|was) [0-9]{1,2} years old\\.";
  const std::string schema = R"({"type":"object","properties":{"n":{"type":"integer"},)"
                             R"("w":{"type":"string","maxLength":6}},"required":["n","w"]})";
  std::vector<sequence_request> reqs;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    reqs.push_back(request(seed + 1, format(kind::regex, pattern), seed));
    reqs.push_back(request(seed + 101, format(kind::json_schema, schema), seed));
    reqs.push_back(request(seed + 201, format(kind::choice, "", {"a", "ab", "abc"}), seed));
  }
  auto plain = make_core(24);
  auto direct = run(*plain, reqs);
  auto overlapped_core = make_core(24);
  overlapped_core->set_overlap_masks(true);
  auto overlapped = run(*overlapped_core, reqs);
  ASSERT_EQ(direct.size(), reqs.size());
  for (const auto& r : reqs) {
    EXPECT_EQ(overlapped[r.id].tokens, direct[r.id].tokens) << r.id;
    EXPECT_EQ(overlapped[r.id].text, direct[r.id].text) << r.id;
    EXPECT_EQ(overlapped[r.id].result.reason, direct[r.id].result.reason) << r.id;
    EXPECT_EQ(overlapped[r.id].result.completion_tokens, direct[r.id].result.completion_tokens);
  }
  EXPECT_TRUE(std::regex_match(direct[1].text, std::regex{pattern})) << direct[1].text;
}

TEST_F(executor_format_test, sampled_json_fits_the_schema) {
  const auto schema = nlohmann::json::parse(R"({"type": "object",
    "properties": {"name": {"type": "string", "maxLength": 10},
                   "friends": {"type": "array", "items": {"type": "string", "maxLength": 8},
                               "maxItems": 3},
                   "happy": {"type": "boolean"}},
    "required": ["name", "friends", "happy"], "additionalProperties": false})");
  auto core = make_core(16);
  std::vector<sequence_request> reqs;
  for (uint64_t seed = 0; seed < 16; ++seed)
    reqs.push_back(request(seed + 1, format(kind::json_schema, schema.dump()), seed, 300));
  auto out = run(*core, std::move(reqs));
  int stopped = 0;
  for (auto& [id, r] : out) {
    EXPECT_EQ(r.result.how, outcome::finished);
    if (r.result.reason != finish_reason::stop) continue;  // max_tokens inside a string
    ++stopped;
    auto doc = nlohmann::json::parse(r.text, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << r.text;
    ASSERT_TRUE(doc.is_object()) << r.text;
    EXPECT_EQ(doc.size(), 3u) << r.text;
    EXPECT_TRUE(doc["name"].is_string()) << r.text;
    EXPECT_TRUE(doc["happy"].is_boolean()) << r.text;
    ASSERT_TRUE(doc["friends"].is_array()) << r.text;
    EXPECT_LE(doc["friends"].size(), 3u) << r.text;
  }
  EXPECT_GE(stopped, 12);
}

TEST_F(executor_format_test, a_choice_ends_without_an_end_token_and_ignore_eos_changes_nothing) {
  auto core = make_core(2);
  auto a = request(1, format(kind::choice, "", {"happy", "sad", "very happy"}), 3);
  auto b = request(2, format(kind::choice, "", {"happy", "sad", "very happy"}), 3);
  b.params.ignore_eos = true;
  auto out = run(*core, {a, b});
  for (auto id : {1, 2}) {
    EXPECT_EQ(out[id].result.reason, finish_reason::stop);
    EXPECT_TRUE(out[id].text == "happy" || out[id].text == "sad" || out[id].text == "very happy")
        << out[id].text;
  }
  // The same seed samples the same, end tokens counted or not.
  EXPECT_EQ(out[1].text, out[2].text);
}

TEST_F(executor_format_test, n_sequences_of_one_prompt_each_follow_their_own_format_state) {
  // Equal prompts share the prompt's blocks (followers of one prefill) and the prefix cache;
  // each sequence keeps its own matcher.
  const std::string pattern = "[a-z]{3,6}( [a-z]{3,6}){2}";
  auto core = make_core(6);
  const auto prompt = *tokenizer->encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her friends and her dog.",
      true);
  ASSERT_GT(prompt.size(), 17u);
  std::vector<sequence_request> reqs;
  for (uint64_t seed = 0; seed < 6; ++seed) {
    reqs.push_back(request(seed + 1, format(kind::regex, pattern), 100 + seed));
    reqs.back().prompt = prompt;
  }
  auto together = run(*core, reqs);
  auto again = run(*core, reqs);
  int32_t cached = 0;
  for (uint64_t seed = 0; seed < 6; ++seed) {
    const auto id = request_id(seed + 1);
    EXPECT_TRUE(std::regex_match(together[id].text, std::regex{pattern})) << together[id].text;
    // Alone, and again from the prefix cache: the same tokens.
    auto alone_core = make_core(1);
    auto alone = run(*alone_core, {reqs[seed]});
    EXPECT_EQ(together[id].tokens, alone[id].tokens);
    EXPECT_EQ(again[id].tokens, alone[id].tokens);
    cached = std::max(cached, again[id].result.cached_tokens);
  }
  // The second time the prompt's full blocks come from the prefix cache (the first sequence
  // looks them up; the others follow its prefill).
  EXPECT_GE(cached, 16);
}

TEST_F(executor_format_test, an_uncompiled_format_is_compiled_on_arrival_or_rejected) {
  auto core = make_core(1);
  auto out = run(*core, {request(1, format(kind::regex, "ab{1,3}c"), 1, 50, false)});
  EXPECT_EQ(out[1].result.how, outcome::finished);
  EXPECT_TRUE(std::regex_match(out[1].text, std::regex{"ab{1,3}c"})) << out[1].text;
  // A format the engine cannot compile ends the request, rejected, naming the field.
  out = run(*core, {request(2, format(kind::regex, "[a-"), 1, 50, false)});
  EXPECT_EQ(out[2].result.how, outcome::rejected);
  EXPECT_EQ(out[2].result.code, ec::bad_request);
  EXPECT_EQ(out[2].result.message.rfind("'structured_outputs': the regular expression", 0), 0u)
      << out[2].result.message;
  // An executor without a compiler rejects it.
  auto bare = make_core(1, false);
  out = run(*bare, {request(3, format(kind::regex, "ab{1,3}c"), 1, 50, false)});
  EXPECT_EQ(out[3].result.how, outcome::rejected);
  EXPECT_NE(out[3].result.message.find("no grammar compiler"), std::string::npos);
}

TEST_F(executor_format_test, logprobs_are_those_of_the_masked_row) {
  auto core = make_core(1);
  auto r = request(1, format(kind::choice, "", {"yes", "no"}), 7);
  r.params.logprobs = 5;
  step_output admitted;
  core->admit({r}, false, admitted);
  std::vector<token_logprob> entries;
  for (int i = 0; i < 100 && core->has_work(); ++i) {
    auto step = core->step();
    for (auto& c : step.chunks) entries.insert(entries.end(), c.logprobs.begin(), c.logprobs.end());
  }
  ASSERT_FALSE(entries.empty());
  // Every alternative reported is one the format allowed: finite, and the first token's
  // alternatives are prefixes of "yes" or "no".
  for (const auto& alt : entries.front().top) {
    if (!std::isfinite(alt.logprob)) continue;
    EXPECT_TRUE(std::string{"yes"}.rfind(alt.text, 0) == 0 ||
                std::string{"no"}.rfind(alt.text, 0) == 0)
        << alt.text;
  }
}

}  // namespace
