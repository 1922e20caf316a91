// logprobs and echo on the real binary with the default stories260K, through the `openai` Python
// package (tests/e2e/logprobs_client.py) and curl, whole and streamed, completions and chat: the
// values equal the float64 reference of transformers (tests/fixtures/logprobs) within 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>

#include "common/text.hpp"
#include "tests/e2e/conveyor_process.hpp"

namespace conveyor::e2e {
namespace {

using nlohmann::json;

constexpr double tolerance = 1e-4;

json fixture() {
  std::ifstream in{CONVEYOR_SOURCE_DIR "/tests/fixtures/logprobs/stories260K.json"};
  return json::parse(in, nullptr, false);
}

// The values of a row of the reference, highest first.
std::vector<double> sorted_values(const json& row) {
  std::vector<double> v = row.get<std::vector<double>>();
  std::sort(v.begin(), v.end(), std::greater<>());
  return v;
}

// A completions `top_logprobs` entry {text: logprob}: the values of the reference row's `n` best
// tokens and of the chosen token (`chosen`, its value), which need not be among them.
void expect_top(const json& top, const json& row, std::size_t n, double chosen,
                const std::string& where) {
  ASSERT_TRUE(top.is_object()) << where << ": " << top;
  std::vector<double> got;
  for (const auto& [text, value] : top.items()) got.push_back(value.get<double>());
  std::sort(got.begin(), got.end(), std::greater<>());
  auto ref = sorted_values(row);
  ref.resize(n);
  if (n == 0 || chosen < ref.back() - tolerance) ref.push_back(chosen);
  // Distinct texts each: as many entries unless two tokens share a text.
  ASSERT_GE(got.size(), 1u) << where;
  ASSERT_LE(got.size(), ref.size()) << where;
  EXPECT_NEAR(got[0], ref[0], tolerance) << where;
  if (got.size() == ref.size()) {
    for (std::size_t k = 0; k < ref.size(); ++k) EXPECT_NEAR(got[k], ref[k], tolerance) << where;
  }
}

// The completion `logprobs` object's offsets count the code points of the tokens before, from
// `start` (for the completion's first token) or 0 (the echoed prompt's first).
void expect_offsets(const json& lp, std::size_t prompt_tokens, std::size_t completion_start) {
  std::size_t offset = 0;
  for (std::size_t i = 0; i < lp["tokens"].size(); ++i) {
    if (i == prompt_tokens) offset = completion_start;
    EXPECT_EQ(lp["text_offset"][i], offset) << "token " << i;
    offset += utf8_code_points(lp["tokens"][i].get<std::string>());
  }
}

// The generated part of a completions `logprobs` object from index `from`: the reference's
// greedy tokens at temperature 0 with their values.
void expect_generated(const json& lp, std::size_t from, const json& c, std::size_t steps,
                      std::size_t n) {
  ASSERT_EQ(lp["tokens"].size(), from + steps) << lp;
  for (std::size_t j = 0; j < steps; ++j) {
    const auto& row = c["step_log_softmax"][j];
    const auto token = c["greedy_tokens"][j].get<int32_t>();
    const std::string where = "step " + std::to_string(j);
    EXPECT_NEAR(lp["token_logprobs"][from + j].get<double>(), row[token].get<double>(), tolerance)
        << where;
    // The greedy token is the most likely one.
    EXPECT_NEAR(lp["token_logprobs"][from + j].get<double>(), sorted_values(row)[0], tolerance)
        << where;
    expect_top(lp["top_logprobs"][from + j], row, n, row[token].get<double>(), where);
  }
}

// The prompt part of an echo's `logprobs`: null first, then the teacher-forced reference.
void expect_prompt(const json& lp, const json& c, std::size_t n) {
  const auto& ids = c["prompt_tokens"];
  ASSERT_GE(lp["tokens"].size(), ids.size()) << lp;
  EXPECT_TRUE(lp["token_logprobs"][0].is_null()) << lp;
  EXPECT_TRUE(lp["top_logprobs"][0].is_null()) << lp;
  std::string text;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    text += lp["tokens"][i].get<std::string>();
    if (i == 0) continue;
    const std::string where = "prompt token " + std::to_string(i);
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), c["prompt_logprobs"][i].get<double>(),
                tolerance)
        << where;
    expect_top(lp["top_logprobs"][i], c["prompt_log_softmax"][i - 1], n,
               c["prompt_logprobs"][i].get<double>(), where);
  }
  EXPECT_EQ(text, c["prompt"]);
}

// The chunks' logprobs objects of a stream, joined (completions shape).
json joined(const json& chunks) {
  json all{{"tokens", json::array()},
           {"token_logprobs", json::array()},
           {"top_logprobs", json::array()},
           {"text_offset", json::array()}};
  for (const auto& chunk : chunks) {
    if (chunk["logprobs"].is_null()) continue;
    for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
      for (const auto& x : chunk["logprobs"][key]) all[key].push_back(x);
  }
  return all;
}

json subset(const json& lp) {
  return json{{"tokens", lp["tokens"]},
              {"token_logprobs", lp["token_logprobs"]},
              {"top_logprobs", lp["top_logprobs"]},
              {"text_offset", lp["text_offset"]}};
}

TEST(e2e_logprobs, openai_python_completions_and_chat_whole_and_streamed) {
  ASSERT_EQ(run_shell(shell_quote(CONVEYOR_TEST_PYTHON) + " -c 'import openai' 2>&1").status, 0)
      << "the openai Python package is missing in " CONVEYOR_TEST_PYTHON
         ": run scripts/setup.sh --tests";
  const auto ref = fixture();
  ASSERT_TRUE(ref.is_object());
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  auto run = run_shell(shell_quote(CONVEYOR_TEST_PYTHON) + " " CONVEYOR_SOURCE_DIR
                       "/tests/e2e/logprobs_client.py " +
                       shell_quote(server.url() + "/v1") + " 2>&1");
  ASSERT_EQ(run.status, 0) << run.out;
  const auto r = json::parse(run.out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << run.out;

  // Greedy, logprobs 5: the reference's tokens and values; streamed, the same in pieces.
  {
    const auto& c = ref["cases"][0];
    const auto& lp = r["greedy"]["logprobs"];
    expect_generated(lp, 0, c, 12, 5);
    std::string text;
    for (const auto& t : lp["tokens"]) text += t.get<std::string>();
    EXPECT_EQ(text, r["greedy"]["text"]);
    expect_offsets(lp, 0, 0);
    EXPECT_EQ(subset(joined(r["greedy_stream"]["chunks"])), subset(lp));
    EXPECT_EQ(r["greedy_stream"]["text"], r["greedy"]["text"]);
    // Each chunk's logprobs are its own tokens.
    for (const auto& chunk : r["greedy_stream"]["chunks"]) {
      if (chunk["logprobs"].is_null()) continue;
      std::string pieces;
      for (const auto& t : chunk["logprobs"]["tokens"]) pieces += t.get<std::string>();
      EXPECT_EQ(pieces, chunk["text"]) << chunk;
    }
  }
  // echo with max_tokens 0: the prompt alone, its teacher-forced log-probabilities.
  {
    const auto& c = ref["cases"][1];
    const auto& whole = r["echo0"];
    EXPECT_EQ(whole["text"], c["prompt"]);
    EXPECT_EQ(whole["finish_reason"], "length");
    EXPECT_EQ(whole["usage"]["completion_tokens"], 0);
    EXPECT_EQ(whole["usage"]["prompt_tokens"], c["prompt_tokens"].size());
    ASSERT_EQ(whole["logprobs"]["tokens"].size(), c["prompt_tokens"].size());
    expect_prompt(whole["logprobs"], c, 3);
    expect_offsets(whole["logprobs"], c["prompt_tokens"].size(), 0);
    const auto& stream = r["echo0_stream"];
    EXPECT_EQ(stream["text"], c["prompt"]);
    EXPECT_EQ(stream["finish_reason"], "length");
    ASSERT_FALSE(stream["chunks"].empty());
    // The first chunk is the prompt with its log-probabilities.
    EXPECT_EQ(stream["chunks"][0]["text"], c["prompt"]);
    EXPECT_EQ(subset(joined(stream["chunks"])), subset(whole["logprobs"]));
  }
  // echo with 2 tokens: the prompt's then the completion's, offsets past the prompt's text.
  {
    const auto& c = ref["cases"][2];
    const auto& whole = r["echo2"];
    const auto prompt = c["prompt"].get<std::string>();
    ASSERT_EQ(whole["text"].get<std::string>().substr(0, prompt.size()), prompt);
    expect_prompt(whole["logprobs"], c, 1);
    expect_generated(whole["logprobs"], c["prompt_tokens"].size(), c, 2, 1);
    expect_offsets(whole["logprobs"], c["prompt_tokens"].size(), utf8_code_points(prompt));
    EXPECT_EQ(r["echo2_stream"]["text"], whole["text"]);
    EXPECT_EQ(subset(joined(r["echo2_stream"]["chunks"])), subset(whole["logprobs"]));
  }
  // Chat: logprobs true, top_logprobs 4; the same values as the rendered prompt's completion.
  {
    const auto& reference = r["chat_reference"]["logprobs"];
    const auto& content = r["chat"]["logprobs"]["content"];
    ASSERT_TRUE(content.is_array()) << r["chat"];
    ASSERT_EQ(content.size(), reference["tokens"].size()) << r["chat"];
    ASSERT_FALSE(content.empty());
    std::string text;
    for (std::size_t i = 0; i < content.size(); ++i) {
      const auto& t = content[i];
      text += t["token"].get<std::string>();
      EXPECT_EQ(t["token"], reference["tokens"][i]);
      EXPECT_NEAR(t["logprob"].get<double>(), reference["token_logprobs"][i].get<double>(), 1e-6);
      const auto token = t["token"].get<std::string>();
      EXPECT_EQ(t["bytes"], json(std::vector<int>(token.begin(), token.end()))) << t;
      ASSERT_EQ(t["top_logprobs"].size(), 4u) << t;
      // Most likely first; at temperature 0 the chosen token is the first.
      EXPECT_EQ(t["top_logprobs"][0]["logprob"], t["logprob"]);
      for (std::size_t k = 1; k < 4; ++k)
        EXPECT_LE(t["top_logprobs"][k]["logprob"].get<double>(),
                  t["top_logprobs"][k - 1]["logprob"].get<double>());
    }
    EXPECT_EQ(text, r["chat"]["text"]);
    json streamed = json::array();
    for (const auto& chunk : r["chat_stream"]["chunks"])
      if (!chunk["logprobs"].is_null())
        for (const auto& t : chunk["logprobs"]["content"]) streamed.push_back(t);
    EXPECT_EQ(streamed, content);
    EXPECT_EQ(r["chat_stream"]["text"], r["chat"]["text"]);
  }
  // Refused values name their field.
  const auto& refused = r["refused"];
  for (const auto& [name, param] :
       std::vector<std::pair<std::string, std::string>>{
           {"logprobs_21", "logprobs"},
           {"logprobs_negative", "logprobs"},
           {"max_tokens_0_without_echo", "max_tokens"},
           {"top_logprobs_without_logprobs", "top_logprobs"},
           {"top_logprobs_21", "top_logprobs"}}) {
    EXPECT_EQ(refused[name]["status"], 400) << name << ": " << refused[name];
    EXPECT_EQ(refused[name]["param"], param) << name << ": " << refused[name];
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(e2e_logprobs, curl_echo_and_excluded_tokens) {
  ASSERT_EQ(run_shell("command -v curl >/dev/null").status, 0)
      << "curl is missing: run scripts/setup.sh --tests";
  const auto ref = fixture();
  ASSERT_TRUE(ref.is_object());
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  const auto url = shell_quote(server.url() + "/v1/completions");
  auto post = [&](const json& body) {
    return run_shell("curl -sSN --fail-with-body " + url + " -H 'Content-Type: application/json' -d " +
                     shell_quote(body.dump()));
  };
  const auto& c = ref["cases"][0];
  // Echo, whole: the prompt's and the completion's log-probabilities in one object.
  auto whole = post({{"prompt", c["prompt"]}, {"max_tokens", 3}, {"temperature", 0},
                     {"echo", true}, {"logprobs", 2}});
  ASSERT_EQ(whole.status, 0) << whole.out;
  const auto body = json::parse(whole.out, nullptr, false);
  const auto& lp = body["choices"][0]["logprobs"];
  expect_prompt(lp, c, 2);
  expect_generated(lp, c["prompt_tokens"].size(), c, 3, 2);
  // Streamed: the first event is the prompt with its log-probabilities.
  auto streamed = post({{"prompt", c["prompt"]}, {"max_tokens", 3}, {"temperature", 0},
                        {"echo", true}, {"logprobs", 2}, {"stream", true}});
  ASSERT_EQ(streamed.status, 0) << streamed.out;
  const auto events = sse_events(streamed.out);
  ASSERT_GE(events.size(), 3u) << streamed.out;
  EXPECT_EQ(events[0]["choices"][0]["text"], c["prompt"]);
  EXPECT_EQ(events[0]["choices"][0]["logprobs"]["tokens"].size(), c["prompt_tokens"].size());
  EXPECT_EQ(stream_text(events), body["choices"][0]["text"]);
  // top_k 2 at temperature 1: the distribution sampled from keeps 2 tokens, the other
  // alternatives are excluded and written -9999.0, as vLLM writes them.
  auto sampled = post({{"prompt", c["prompt"]}, {"max_tokens", 4}, {"temperature", 1},
                       {"top_k", 2}, {"seed", 7}, {"logprobs", 5}});
  ASSERT_EQ(sampled.status, 0) << sampled.out;
  const auto s = json::parse(sampled.out, nullptr, false)["choices"][0]["logprobs"];
  ASSERT_EQ(s["top_logprobs"].size(), 4u) << sampled.out;
  EXPECT_NE(sampled.out.find("-9999.0"), std::string::npos) << sampled.out;
  for (const auto& top : s["top_logprobs"]) {
    int excluded = 0;
    double kept = 0;
    for (const auto& [text, value] : top.items()) {
      if (value == -9999.0)
        ++excluded;
      else
        kept += std::exp(value.get<double>());
    }
    // Five alternatives (distinct texts here): two kept, summing to 1, three excluded.
    EXPECT_EQ(top.size(), 5u) << top;
    EXPECT_EQ(excluded, 3) << top;
    EXPECT_NEAR(kept, 1.0, 1e-5) << top;
  }
  for (const auto& v : s["token_logprobs"]) EXPECT_GT(v.get<double>(), -9999.0);
  // The same prompt as token ids (BOS included, as the fixture's): echoed as its text, with the
  // same log-probabilities.
  auto ids = post({{"prompt", c["prompt_tokens"]}, {"max_tokens", 0}, {"echo", true},
                   {"logprobs", 2}});
  ASSERT_EQ(ids.status, 0) << ids.out;
  const auto by_ids = json::parse(ids.out, nullptr, false);
  EXPECT_EQ(by_ids["choices"][0]["text"], c["prompt"]) << ids.out;
  expect_prompt(by_ids["choices"][0]["logprobs"], c, 2);
  // A refusal by curl: 400 naming the field.
  auto bad = run_shell("curl -sS " + url + " -H 'Content-Type: application/json' -d " +
                       shell_quote(R"({"prompt": "Hi", "logprobs": true})"));
  EXPECT_EQ(json::parse(bad.out, nullptr, false)["error"]["param"], "logprobs") << bad.out;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace conveyor::e2e
