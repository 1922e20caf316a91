// POST /v1/chat/completions on the real binary with stories260K and its own template
// (models/stories260K/chat_template.jinja): curl (whole and streamed) and the `openai` Python
// package get, greedily, exactly the text that /v1/completions gives for jinja2's rendering of the
// same conversation (committed in tests/fixtures/chat_templates/expected.json) tokenized adding no
// special tokens, as chat tokenizes it, so the reference lies outside the chat code.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/e2e/conveyor_process.hpp"

namespace conveyor::e2e {
namespace {

using nlohmann::json;

json fixture() {
  std::ifstream in{CONVEYOR_SOURCE_DIR "/tests/fixtures/chat_templates/expected.json"};
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// jinja2's rendering of `conversation` with stories260K's template and a generation prompt.
std::string jinja2_rendering(const json& f, const std::string& conversation) {
  for (const auto& r : f["renderings"])
    if (r["template"] == "stories260K" && r["conversation"] == conversation &&
        r["add_generation_prompt"] == true)
      return r["output"];
  ADD_FAILURE() << "no stories260K rendering of " << conversation;
  return {};
}

std::string curl_post(const conveyor_process& server, const std::string& path, const json& body,
                      bool stream = false) {
  auto run = run_shell(std::string{"curl -sS"} + (stream ? "N" : "") + " --fail-with-body " +
                       shell_quote(server.url() + path) +
                       " -H 'Content-Type: application/json' -d " + shell_quote(body.dump()));
  EXPECT_EQ(run.status, 0) << run.out;
  return run.out;
}

TEST(e2e_chat, curl_whole_and_streamed_equal_the_completion_of_the_jinja2_rendering) {
  ASSERT_EQ(run_shell("command -v curl >/dev/null").status, 0)
      << "curl is missing: run scripts/setup.sh --tests";
  const auto f = fixture();
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  for (const std::string conversation : {"system_user", "system_multi_turn"}) {
    SCOPED_TRACE(conversation);
    const auto reference = json::parse(curl_post(server, "/v1/completions",
                                                 {{"prompt", jinja2_rendering(f, conversation)},
                                                  {"add_special_tokens", false},
                                                  {"max_tokens", 40},
                                                  {"temperature", 0}}));
    const std::string expected = reference["choices"][0]["text"];
    ASSERT_FALSE(expected.empty());
    const json request{{"messages", f["conversations"][conversation]},
                       {"max_tokens", 40},
                       {"temperature", 0}};

    const auto whole = json::parse(curl_post(server, "/v1/chat/completions", request));
    EXPECT_EQ(whole["object"], "chat.completion");
    EXPECT_EQ(whole["model"], "stories260K");
    EXPECT_EQ(whole["choices"][0]["message"]["role"], "assistant");
    EXPECT_EQ(whole["choices"][0]["message"]["content"], expected);
    EXPECT_EQ(whole["choices"][0]["finish_reason"], reference["choices"][0]["finish_reason"]);
    // Same prompt tokens: the chat prompt was tokenized as the completion's (no BOS: the template
    // writes none). The completion just before left every full block of the prompt cached:
    // all of them are found but the one holding the last token.
    auto counts = [](json usage) {
      usage.erase("prompt_tokens_details");
      return usage;
    };
    EXPECT_EQ(counts(whole["usage"]), counts(reference["usage"]));
    const int64_t prompt_tokens = reference["usage"]["prompt_tokens"];
    EXPECT_EQ(whole["usage"]["prompt_tokens_details"]["cached_tokens"],
              (prompt_tokens - 1) / 16 * 16);

    auto streamed_request = request;
    streamed_request["stream"] = true;
    streamed_request["stream_options"] = {{"include_usage", true}};
    const auto events =
        sse_events(curl_post(server, "/v1/chat/completions", streamed_request, true));
    ASSERT_GE(events.size(), 4u);
    EXPECT_EQ(events.front()["choices"][0]["delta"]["role"], "assistant");
    EXPECT_EQ(events.back(), "[DONE]");
    std::string text;
    for (std::size_t i = 0; i + 2 < events.size(); ++i) {
      EXPECT_EQ(events[i]["object"], "chat.completion.chunk");
      const auto& delta = events[i]["choices"][0]["delta"];
      if (delta.contains("content")) text += delta["content"].get<std::string>();
    }
    EXPECT_EQ(text, expected);
    EXPECT_EQ(events[events.size() - 3]["choices"][0]["finish_reason"],
              reference["choices"][0]["finish_reason"]);
    EXPECT_EQ(events[events.size() - 2]["usage"], whole["usage"]);
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(e2e_chat, openai_python_chat_completions_equal_the_reference) {
  ASSERT_EQ(run_shell(shell_quote(CONVEYOR_TEST_PYTHON) + " -c 'import openai' 2>&1").status, 0)
      << "the openai Python package is missing in " CONVEYOR_TEST_PYTHON
         ": run scripts/setup.sh --tests";
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  auto run = run_shell(shell_quote(CONVEYOR_TEST_PYTHON) + " " CONVEYOR_SOURCE_DIR
                       "/tests/e2e/openai_client.py " + shell_quote(server.url() + "/v1") +
                       " chat 2>&1");
  ASSERT_EQ(run.status, 0) << run.out;
  const auto result = json::parse(run.out, nullptr, false);
  ASSERT_TRUE(result.is_object()) << run.out;
  const auto& expected = result["reference"]["text"];
  ASSERT_FALSE(expected.get<std::string>().empty());
  EXPECT_EQ(result["whole"]["content"], expected);
  EXPECT_EQ(result["whole"]["role"], "assistant");
  EXPECT_EQ(result["whole"]["object"], "chat.completion");
  EXPECT_EQ(result["whole"]["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  auto counts = [](json usage) {
    usage.erase("prompt_tokens_details");
    return usage;
  };
  EXPECT_EQ(counts(result["whole"]["usage"]), counts(result["reference"]["usage"]));
  EXPECT_EQ(result["stream"]["text"], expected);
  EXPECT_EQ(result["stream"]["roles"], json::array({"assistant"}));
  EXPECT_EQ(result["stream"]["finish_reason"], result["whole"]["finish_reason"]);
  EXPECT_EQ(result["bad_role"]["class"], "BadRequestError");
  EXPECT_EQ(result["bad_role"]["param"], "messages[0].role");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(e2e_chat, an_unsupported_template_fails_at_start_with_construct_and_line) {
  auto run = run_shell(shell_quote(conveyor_program()) +
                       " serve --port 0 --set 'model.chat_template=Hi\n{% call m() %}{% "
                       "endcall %}' 2>&1");
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.out.find("model.chat_template: chat template line 2: unsupported tag 'call'"),
            std::string::npos)
      << run.out;
  run = run_shell(shell_quote(conveyor_program()) +
                  " serve --port 0 --set model.chat_template=/nonexistent/chat.jinja 2>&1");
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.out.find("model.chat_template: cannot read the template file "
                         "'/nonexistent/chat.jinja'"),
            std::string::npos)
      << run.out;
}

}  // namespace
}  // namespace conveyor::e2e

namespace conveyor::e2e {
namespace {

// A tokenizer.json with a tokenizer_config.json beside it: its chat template (here the
// contents of the messages, concatenated, and no bos_token) is the one served, through the
// Hugging Face tokenizer, tokenized adding no special tokens although its post-processor adds
// BOS to a completion's prompt.
TEST(e2e_chat, the_template_of_tokenizer_config_json_is_served) {
  conveyor_process server{
      {"--set", "model.tokenizer=tests/fixtures/tokenizers/llama_spm/tokenizer.json"}};
  ASSERT_TRUE(server.ok()) << server.error();
  const json request{{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                     {"max_tokens", 60},
                     {"temperature", 0}};
  auto reply = server.request("POST", "/v1/chat/completions", request.dump());
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200u) << reply->body;
  const auto body = reply->json();
  auto reference = server.request("POST", "/v1/completions",
                                  json{{"prompt", "Once upon a time"},
                                       {"add_special_tokens", false},
                                       {"max_tokens", 60},
                                       {"temperature", 0}}
                                      .dump());
  ASSERT_TRUE(reference);
  ASSERT_EQ(reference->status, 200u) << reference->body;
  EXPECT_EQ(body["choices"][0]["message"]["content"], reference->json()["choices"][0]["text"]);
  EXPECT_EQ(body["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace conveyor::e2e
