// A Hugging Face model directory served as a user would: `conveyor serve --model DIR` with the
// directory's own tokenizer.json, tokenizer_config.json (chat template) and
// generation_config.json. The directory is the default model written out by transformers
// (tools/fixtures/make_hf_models.py, make_tokenizers.py), so run.c's expected story is the answer.
#include <gtest/gtest.h>

#include "tests/e2e/conveyor_process.hpp"

namespace conveyor::e2e {
namespace {

using nlohmann::json;

TEST(e2e_hf_directory, serves_completions_and_chat_with_the_directorys_own_files) {
  conveyor_process server{{"--model", "tests/fixtures/hf_models/stories260K"}};
  ASSERT_TRUE(server.ok()) << server.error();
  EXPECT_NE(server.log().find("tests/fixtures/hf_models/stories260K/tokenizer.json"),
            std::string::npos)
      << "the directory's tokenizer.json is the tokenizer: " << server.log();

  auto models = server.request("GET", "/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->json()["data"][0]["id"], "stories260K") << "the folder's name";

  auto completion = server.request(
      "POST", "/v1/completions",
      R"({"prompt": "Once upon a time", "max_tokens": 60, "temperature": 0})");
  ASSERT_TRUE(completion);
  ASSERT_EQ(completion->status, 200u) << completion->body;
  EXPECT_EQ(completion->json()["choices"][0]["text"], expected_once_upon_a_time());
  EXPECT_EQ(completion->json()["usage"]["prompt_tokens"], 5);

  // tokenizer_config.json's template concatenates the contents and writes no bos_token: the
  // chat prompt is the completion's without BOS (as transformers' apply_chat_template gives it).
  auto chat = server.request(
      "POST", "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 60,
          "temperature": 0})");
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200u) << chat->body;
  auto without_bos = server.request(
      "POST", "/v1/completions",
      R"({"prompt": "Once upon a time", "add_special_tokens": false, "max_tokens": 60,
          "temperature": 0})");
  ASSERT_TRUE(without_bos);
  EXPECT_EQ(chat->json()["choices"][0]["message"]["content"],
            without_bos->json()["choices"][0]["text"]);
  EXPECT_EQ(chat->json()["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(e2e_hf_directory, generate_prints_the_expected_story) {
  auto run = run_shell(shell_quote(conveyor_program()) +
                       " generate --model " CONVEYOR_SOURCE_DIR
                       "/tests/fixtures/hf_models/stories260K --prompt 'Once upon a time' "
                       "--max-tokens 60 --temperature 0 2>/dev/null");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_EQ(run.out, "Once upon a time" + expected_once_upon_a_time() + "\n");
}

}  // namespace
}  // namespace conveyor::e2e
