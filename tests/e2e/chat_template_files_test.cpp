// A model's own chat template, wherever transformers stores it, served as transformers applies
// it: each folder of tests/fixtures/chat_templates/models/ (a tokenizer saved by transformers with
// chat_template.jinja, tokenizer_config.json's string or list field, additional_chat_templates/,
// or no template; tools/fixtures/make_chat_templates.py) completes a copy of the stories260K
// Hugging Face directory, and `conveyor serve --model` on it must give, for each conversation,
// exactly the input_ids of transformers' apply_chat_template(tokenize=True) (no BOS beyond what
// the template writes, although the tokenizer's post-processor adds one to plain text), and the
// greedy reply to those ids; a model whose templates transformers refuses gets chat refused with
// a 400 that says why.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/e2e/conveyor_process.hpp"

namespace conveyor::e2e {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const fs::path source_dir{CONVEYOR_SOURCE_DIR};

json models_fixture() {
  std::ifstream in{source_dir / "tests/fixtures/chat_templates/models.json"};
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// A model directory in a fresh temporary folder: the stories260K Hugging Face model's config and
// weights, and the tokenizer files (with their chat templates) of fixture folder `name`.
class model_directory {
 public:
  explicit model_directory(const std::string& name) {
    char pattern[] = "/tmp/conveyor-chat-model-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) return;
    path_ = fs::path{pattern} / name;
    fs::create_directory(path_);
    const auto weights = source_dir / "tests/fixtures/hf_models/stories260K";
    for (const char* file : {"config.json", "generation_config.json", "model.safetensors"})
      fs::copy_file(weights / file, path_ / file);
    fs::copy(source_dir / "tests/fixtures/chat_templates/models" / name, path_,
             fs::copy_options::recursive);
  }
  ~model_directory() {
    if (!path_.empty()) fs::remove_all(path_.parent_path());
  }
  model_directory(const model_directory&) = delete;
  model_directory& operator=(const model_directory&) = delete;

  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

json post(conveyor_process& server, const std::string& path, const json& body,
          unsigned status = 200) {
  auto reply = server.request("POST", path, body.dump());
  if (!reply) {
    ADD_FAILURE() << "no answer to " << path;
    return json{};
  }
  EXPECT_EQ(reply->status, status) << path << " " << body.dump() << " -> " << reply->body;
  return reply->json();
}

void expect_transformers_ids_and_reply(const std::string& name) {
  SCOPED_TRACE(name);
  const auto fixture = models_fixture();
  const auto& model = fixture.at("models").at(name);
  model_directory dir{name};
  ASSERT_FALSE(dir.path().empty());
  conveyor_process server{{"--model", dir.path()}};
  ASSERT_TRUE(server.ok()) << server.error();
  int compared = 0;
  for (const auto& r : model.at("renderings")) {
    const std::string conversation = r.at("conversation");
    const bool generation_prompt = r.at("add_generation_prompt");
    SCOPED_TRACE(conversation + (generation_prompt ? " + generation prompt" : ""));
    const auto& messages = fixture.at("conversations").at(conversation);
    const auto& ids = r.at("ids");
    // The prompt's ids: /tokenize of the conversation tokenizes it as chat does.
    const auto tokenized =
        post(server, "/tokenize",
             {{"messages", messages}, {"add_generation_prompt", generation_prompt}});
    EXPECT_EQ(tokenized["tokens"], ids);
    // The chat completion's prompt is those ids: its usage counts them and its greedy reply is the
    // reply to the ids themselves.
    const auto chat = post(server, "/v1/chat/completions",
                           {{"messages", messages},
                            {"add_generation_prompt", generation_prompt},
                            {"max_tokens", 24},
                            {"temperature", 0}});
    const auto reference =
        post(server, "/v1/completions", {{"prompt", ids}, {"max_tokens", 24}, {"temperature", 0}});
    EXPECT_EQ(chat["usage"]["prompt_tokens"], ids.size());
    EXPECT_EQ(chat["choices"][0]["message"]["content"], reference["choices"][0]["text"]);
    ++compared;
  }
  EXPECT_EQ(compared, 4);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

void expect_chat_refused(const std::string& name, const std::string& because) {
  SCOPED_TRACE(name);
  const auto fixture = models_fixture();
  for (const auto& r : fixture.at("models").at(name).at("renderings"))
    ASSERT_TRUE(r.contains("error")) << "transformers refuses this model's conversations too";
  model_directory dir{name};
  ASSERT_FALSE(dir.path().empty());
  conveyor_process server{{"--model", dir.path()}};
  ASSERT_TRUE(server.ok()) << server.error();
  const json messages = fixture.at("conversations").at("system_user");
  const auto chat =
      post(server, "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 4}}, 400);
  EXPECT_EQ(chat["error"]["type"], "invalid_request_error");
  const std::string message = chat["error"]["message"];
  EXPECT_NE(message.find(because), std::string::npos) << message;
  EXPECT_NE(message.find("model.chat_template"), std::string::npos) << message;
  const auto tokenized = post(server, "/tokenize", {{"messages", messages}}, 400);
  EXPECT_EQ(tokenized["error"]["message"], message);
  // Everything else is served.
  post(server, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 4}});
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(e2e_chat_template_files, chat_template_jinja_is_the_models_template) {
  expect_transformers_ids_and_reply("jinja_file");
}

TEST(e2e_chat_template_files, tokenizer_config_string_field_is_the_models_template) {
  expect_transformers_ids_and_reply("string_field");
}

TEST(e2e_chat_template_files, named_templates_serve_the_one_named_default) {
  expect_transformers_ids_and_reply("named_list");
  expect_transformers_ids_and_reply("named_files");
}

TEST(e2e_chat_template_files, chat_template_jinja_wins_over_the_field) {
  expect_transformers_ids_and_reply("jinja_file_and_field");
}

TEST(e2e_chat_template_files, a_model_without_a_template_gets_chat_refused) {
  expect_chat_refused("no_template", "has no chat template");
}

TEST(e2e_chat_template_files, templates_for_tool_use_only_get_chat_refused) {
  expect_chat_refused("tool_use_only", "tool_use");
}

// Given tools (and tool_choice "auto", read by model.tool_call_parser), a model's template named
// "tool_use" renders the conversation, as apply_chat_template(tools=...) picks it: the prompt is
// transformers' ids, and the greedy reply (no calls in it) is the reply to those ids. A model
// with a tool_use template alone serves conversations with tools.
TEST(e2e_chat_template_files, conversations_with_tools_get_the_template_named_tool_use) {
  const auto fixture = models_fixture();
  for (const std::string name : {"named_list", "named_files", "tool_use_only", "string_field"}) {
    SCOPED_TRACE(name);
    model_directory dir{name};
    ASSERT_FALSE(dir.path().empty());
    conveyor_process server{{"--model", dir.path(), "--set", "model.tool_call_parser=hermes"}};
    ASSERT_TRUE(server.ok()) << server.error();
    for (const auto& r : fixture.at("models").at(name).at("tool_renderings")) {
      SCOPED_TRACE(r.at("conversation").get<std::string>());
      const auto& ids = r.at("ids");
      const auto chat = post(server, "/v1/chat/completions",
                             {{"messages", fixture.at("conversations").at(r.at("conversation"))},
                              {"tools", fixture.at("tools")},
                              {"max_tokens", 24},
                              {"temperature", 0}});
      EXPECT_EQ(chat["usage"]["prompt_tokens"], ids.size());
      const auto reference = post(server, "/v1/completions",
                                  {{"prompt", ids}, {"max_tokens", 24}, {"temperature", 0}});
      EXPECT_EQ(chat["choices"][0]["message"]["content"], reference["choices"][0]["text"]);
    }
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
}

// model.chat_template serves chat for a model that has no template of its own.
TEST(e2e_chat_template_files, model_chat_template_names_one_for_a_model_without) {
  const auto fixture = models_fixture();
  model_directory dir{"no_template"};
  ASSERT_FALSE(dir.path().empty());
  // The same template as string_field's, so transformers' ids for that folder are the reference.
  std::ifstream in{source_dir /
                   "tests/fixtures/chat_templates/models/string_field/tokenizer_config.json"};
  const auto config = json::parse(in);
  const std::string template_file = dir.path() + "/../chat.jinja";
  std::ofstream{template_file} << config.at("chat_template").get<std::string>();
  conveyor_process server{{"--model", dir.path(), "--set", "model.chat_template=" + template_file}};
  ASSERT_TRUE(server.ok()) << server.error();
  const auto& r = fixture.at("models").at("string_field").at("renderings").at(1);
  const auto tokenized =
      post(server, "/tokenize",
           {{"messages", fixture.at("conversations").at(r.at("conversation").get<std::string>())},
            {"add_generation_prompt", r.at("add_generation_prompt")}});
  EXPECT_EQ(tokenized["tokens"], r.at("ids"));
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace conveyor::e2e
