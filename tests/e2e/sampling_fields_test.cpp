// The sampling fields on the real binary: the `openai` Python package
// (tests/e2e/sampling_client.py) and curl send penalties, logit_bias, min_tokens,
// stop_token_ids, ignore_eos and token-id prompts, streamed and not, and /tokenize and
// /detokenize are checked against the tokenizers library's ids (tests/fixtures/tokenizers).
#include <gtest/gtest.h>

#include <fstream>

#include "tests/e2e/conveyor_process.hpp"

namespace conveyor::e2e {
namespace {

using nlohmann::json;

json run_sampling_client(const conveyor_process& server, const std::string& scenario) {
  auto run = run_shell(shell_quote(CONVEYOR_TEST_PYTHON) +
                       " " CONVEYOR_SOURCE_DIR "/tests/e2e/sampling_client.py " +
                       shell_quote(server.url() + "/v1") + " " + scenario + " 2>&1");
  EXPECT_EQ(run.status, 0) << run.out;
  auto result = json::parse(run.out, nullptr, false);
  EXPECT_TRUE(result.is_object()) << run.out;
  return result;
}

class e2e_sampling_fields : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(run_shell(shell_quote(CONVEYOR_TEST_PYTHON) + " -c 'import openai' 2>&1").status, 0)
        << "the openai Python package is missing in " CONVEYOR_TEST_PYTHON
           ": run scripts/setup.sh --tests";
  }
};

json text_of(const json& run) {
  return run["texts"][0];
}

TEST_F(e2e_sampling_fields, openai_python_whole_and_streamed) {
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  const auto r = run_sampling_client(server, "sampling");
  const std::string story = expected_once_upon_a_time();
  const auto story_ids = r["story"].get<std::vector<int32_t>>();
  ASSERT_GE(story_ids.size(), 60u);
  for (const char* mode : {"whole", "stream"}) {
    SCOPED_TRACE(mode);
    const auto& m = r[mode];
    const std::string greedy = text_of(m["greedy"]);
    EXPECT_EQ(story.rfind(greedy, 0), 0u) << greedy;
    EXPECT_EQ(m["greedy"]["usage"]["completion_tokens"], 40);
    // Streamed and whole agree, field by field; the streamed runs come second and find the
    // whole runs' prompts in the prefix cache, which only their cached count tells.
    auto without_cached = [](json run) {
      if (run.contains("usage")) run["usage"].erase("prompt_tokens_details");
      return run;
    };
    for (const auto& [name, run] : m.items())
      EXPECT_EQ(without_cached(run), without_cached(r["whole"][name]))
          << name << " differs between whole and stream";
    // logit_bias -100 on the token greedy decoding takes first ("," of ", there was") keeps it out.
    const std::string biased = text_of(m["bias"]);
    EXPECT_NE(biased.substr(0, 1), ",") << biased;
    EXPECT_NE(biased, greedy);
    // +100 makes token 100 the first one: its text as /detokenize gives it.
    EXPECT_EQ(text_of(m["bias_up"]), r["detokenize_100"]["prompt"]);
    EXPECT_EQ(text_of(m["chat_bias_up"]), r["detokenize_100"]["prompt"]);
    // Penalties change the story (their exact effect: pipeline_tests executor_sampling_test).
    EXPECT_NE(text_of(m["penalties"]), greedy);
    EXPECT_NE(text_of(m["repetition"]), greedy);
    EXPECT_NE(text_of(m["chat_penalties"]), text_of(m["chat_plain"]));
    // The story ends by itself before 480 tokens; ignore_eos gives exactly 480.
    EXPECT_EQ(m["ends_alone"]["finish_reasons"][0], "stop");
    EXPECT_LT(m["ends_alone"]["usage"]["completion_tokens"], 480);
    EXPECT_EQ(m["ignore_eos"]["finish_reasons"][0], "length");
    EXPECT_EQ(m["ignore_eos"]["usage"]["completion_tokens"], 480);
    const std::string alone = text_of(m["ends_alone"]);
    EXPECT_EQ(text_of(m["ignore_eos"]).get<std::string>().rfind(alone, 0), 0u);
    EXPECT_GT(text_of(m["ignore_eos"]).get<std::string>().size(), alone.size());
    // stop_token_ids: the story's fifth token ends it with "stop", its text not output.
    const int32_t stop_id = r["stop_id"];
    const auto at = std::find(story_ids.begin(), story_ids.end(), stop_id) - story_ids.begin();
    EXPECT_EQ(m["stop_token_ids"]["finish_reasons"][0], "stop");
    EXPECT_EQ(m["stop_token_ids"]["usage"]["completion_tokens"], at);
    EXPECT_EQ(text_of(m["stop_token_ids"]), ", there was a");
    // In chat, the id of "." ends the answer right before its first full stop.
    const std::string chat_plain = text_of(m["chat_plain"]);
    ASSERT_NE(chat_plain.find('.'), std::string::npos) << chat_plain;
    EXPECT_EQ(text_of(m["chat_stop_token_ids"]), chat_plain.substr(0, chat_plain.find('.')));
    EXPECT_EQ(m["chat_stop_token_ids"]["finish_reasons"][0], "stop");
    // min_tokens: "Lily" would end the story after 10 tokens; with min_tokens 12 the next
    // "Lily", at the start of the second line, ends it.
    EXPECT_EQ(text_of(m["stop_lily"]), ", there was a little girl named ");
    EXPECT_EQ(m["stop_lily"]["usage"]["completion_tokens"], 10);
    const auto second_lily = story.find("Lily", story.find("Lily") + 4);
    EXPECT_EQ(text_of(m["min_tokens_lily"]), story.substr(0, second_lily));
    EXPECT_EQ(m["min_tokens_lily"]["finish_reasons"][0], "stop");
    // A token prompt is used as given: the ids of "Once upon a time" (BOS first) give its story.
    EXPECT_EQ(m["token_prompt"]["texts"][0], greedy);
    EXPECT_EQ(m["token_prompt"]["usage"]["prompt_tokens"], 5);
    EXPECT_EQ(m["token_prompts"]["texts"].size(), 2u);
    EXPECT_EQ(story.rfind(m["token_prompts"]["texts"][0].get<std::string>(), 0), 0u);
    EXPECT_EQ(m["token_prompts"]["usage"]["prompt_tokens"], 5 + 3);
    EXPECT_EQ(m["token_prompts"]["usage"]["completion_tokens"], 20);
  }
  // /tokenize gives run.c's prompt ids; /detokenize gives the text back; the chat's count is
  // the prompt_tokens of the chat completion.
  EXPECT_EQ(r["tokenize"]["tokens"], r["prompt_ids"]);
  EXPECT_EQ(r["tokenize"]["count"], 5);
  EXPECT_EQ(r["tokenize"]["max_model_len"], 512);
  EXPECT_EQ(r["detokenize"]["prompt"], "Once upon a time");
  EXPECT_EQ(r["tokenize_chat"]["count"], r["whole"]["chat_plain"]["usage"]["prompt_tokens"]);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST_F(e2e_sampling_fields, openai_python_refusals_name_the_field) {
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  const auto r = run_sampling_client(server, "refusals");
  for (const auto& [name, refusal] : r.items()) {
    if (name == "accepted" || name == "tokenize_bad" || name == "detokenize_bad") continue;
    EXPECT_EQ(refusal["class"], "BadRequestError") << name << ": " << refusal;
    EXPECT_EQ(refusal["status"], 400) << name;
    const std::string param = name.rfind("chat.", 0) == 0 ? name.substr(5) : name;
    EXPECT_EQ(refusal["param"], param) << refusal;
  }
  EXPECT_EQ(r["logit_bias.99999"]["message"],
            "'logit_bias' token id 99999 is outside the vocabulary (0..511)");
  EXPECT_EQ(r["prompt[1][3]"]["message"],
            "'prompt[1][3]' is outside the vocabulary (0..511), got 9999");
  EXPECT_EQ(r["accepted"], "length");
  EXPECT_EQ(r["tokenize_bad"][0], 400);
  EXPECT_EQ(r["tokenize_bad"][1]["error"]["param"], "prompt");
  EXPECT_EQ(r["detokenize_bad"][0], 400);
  EXPECT_EQ(r["detokenize_bad"][1]["error"]["param"], "tokens[1]");
  EXPECT_EQ(server.stop(), 0) << server.log();
  // The unknown field was logged, once.
  const auto log = server.log();
  const std::string line = "ignoring the unknown request field \"some_unknown_field\"";
  EXPECT_NE(log.find(line), std::string::npos) << log;
}

TEST(e2e_sampling_curl, fields_tokenize_and_methods) {
  ASSERT_EQ(run_shell("command -v curl >/dev/null").status, 0);
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  auto post = [&](const std::string& path, const std::string& body) {
    auto out = run_shell("curl -sS -w '\\n%{http_code}' " + shell_quote(server.url() + path) +
                         " -H 'Content-Type: application/json' -d " + shell_quote(body));
    const auto cut = out.out.rfind('\n');
    return std::pair{std::stoi(out.out.substr(cut + 1)), out.out.substr(0, cut)};
  };
  // Whole and streamed, with every field at once: the same text either way.
  const std::string fields =
      R"("prompt": [1, 403, 407, 261, 378], "max_tokens": 30, "temperature": 0,
         "logit_bias": {"432": -100}, "presence_penalty": 0.5, "frequency_penalty": 0.5,
         "repetition_penalty": 1.3, "min_tokens": 30, "stop_token_ids": [376],
         "ignore_eos": true)";
  auto [status, whole] = post("/v1/completions", "{" + fields + "}");
  ASSERT_EQ(status, 200) << whole;
  const auto body = json::parse(whole);
  EXPECT_EQ(body["usage"]["completion_tokens"], 30) << whole;  // min_tokens = max_tokens
  EXPECT_EQ(body["usage"]["prompt_tokens"], 5);
  EXPECT_NE(body["choices"][0]["text"].get<std::string>().substr(0, 1), ",");
  auto [sstatus, streamed] = post("/v1/completions", "{" + fields + R"(, "stream": true})");
  ASSERT_EQ(sstatus, 200);
  const auto events = sse_events(streamed);
  EXPECT_EQ(stream_text(events), body["choices"][0]["text"]);
  // Refused values name the field.
  auto [bad, refusal] = post("/v1/completions", R"({"prompt": "x", "logit_bias": {"99999": 5}})");
  EXPECT_EQ(bad, 400);
  EXPECT_EQ(json::parse(refusal)["error"]["param"], "logit_bias.99999");
  // /tokenize and /detokenize round trip; GET is 405 with Allow like the other routes.
  auto [ts, tokens] = post("/tokenize", R"({"prompt": "Once upon a time"})");
  ASSERT_EQ(ts, 200);
  EXPECT_EQ(json::parse(tokens)["tokens"], json::parse("[1, 403, 407, 261, 378]"));
  auto [ds, text] = post("/detokenize", R"({"tokens": [1, 403, 407, 261, 378]})");
  ASSERT_EQ(ds, 200);
  EXPECT_EQ(json::parse(text)["prompt"], "Once upon a time");
  for (const char* path : {"/tokenize", "/detokenize"}) {
    auto get = run_shell("curl -sS -i " + shell_quote(server.url() + path));
    EXPECT_NE(get.out.find("HTTP/1.1 405"), std::string::npos) << get.out;
    EXPECT_NE(get.out.find("Allow: POST"), std::string::npos) << get.out;
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// /tokenize and /detokenize with the Hugging Face tokenizers of tests/fixtures/tokenizers (on the
// trivial model, which takes any vocabulary) against the ids the tokenizers library gave for the
// corpus, with and without special tokens, and its decoding.
TEST_F(e2e_sampling_fields, tokenize_matches_the_tokenizers_library) {
  for (const char* name : {"gpt2", "llama3", "llama_spm", "llama_legacy"}) {
    SCOPED_TRACE(name);
    const std::string dir = std::string{"tests/fixtures/tokenizers/"} + name;
    conveyor_process server{{"--model", "trivial", "--tokenizer", dir}};
    ASSERT_TRUE(server.ok()) << server.error();
    const auto r = run_sampling_client(server, "tokenize");
    std::ifstream in(std::string{CONVEYOR_SOURCE_DIR} + "/" + dir + "/expected.json");
    const auto expected = json::parse(in, nullptr, false);
    ASSERT_TRUE(expected.is_object());
    ASSERT_EQ(r["ids"].size(), expected["ids"].size());
    for (std::size_t i = 0; i < expected["ids"].size(); ++i) {
      ASSERT_EQ(r["ids"][i], expected["ids"][i]) << r["strings"][i];
      ASSERT_EQ(r["ids_special"][i], expected["ids_special"][i]) << r["strings"][i];
      ASSERT_EQ(r["decoded"][i], expected["decoded"][i]) << r["strings"][i];
    }
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
}

}  // namespace
}  // namespace conveyor::e2e
