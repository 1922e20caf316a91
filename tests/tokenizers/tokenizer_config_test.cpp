// tokenizer_config.json: the token keys in both spellings, the flags, the chat template as a
// string or a named list, and the errors that name the file and key; the chat templates beside a
// tokenizer as transformers finds them (files before the field).
#include "tokenizers/tokenizer_config.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace conveyor::tokenizers {

TEST(tokenizer_config, reads_strings_objects_flags_and_template) {
  auto cfg = parse_tokenizer_config(R"({
    "bos_token": "<s>",
    "eos_token": {"content": "</s>", "lstrip": false, "__type": "AddedToken"},
    "unk_token": null,
    "add_bos_token": true, "add_eos_token": false,
    "chat_template": "{{ messages }}",
    "model_max_length": 2048, "clean_up_tokenization_spaces": false})",
                                    "t/tokenizer_config.json");
  ASSERT_TRUE(cfg) << message_of(cfg.error());
  EXPECT_EQ(cfg->bos_token, "<s>");
  EXPECT_EQ(cfg->eos_token, "</s>");
  EXPECT_EQ(cfg->unk_token, "");
  EXPECT_EQ(cfg->add_bos_token, std::optional<bool>{true});
  EXPECT_EQ(cfg->add_eos_token, std::optional<bool>{false});
  using templates = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(cfg->chat_templates, (templates{{"default", "{{ messages }}"}}));
  EXPECT_EQ(cfg->model_max_length, std::optional<long long>{2048});
}

TEST(tokenizer_config, absent_keys_keep_defaults_and_huge_max_length_is_none) {
  auto cfg = parse_tokenizer_config(R"({"model_max_length": 1e30})", "x.json");
  ASSERT_TRUE(cfg);
  EXPECT_EQ(cfg->bos_token, "");
  EXPECT_FALSE(cfg->add_bos_token.has_value());
  EXPECT_FALSE(cfg->model_max_length.has_value());
  EXPECT_TRUE(cfg->chat_templates.empty());
}

TEST(tokenizer_config, chat_template_list_keeps_every_named_template) {
  using templates = std::vector<std::pair<std::string, std::string>>;
  auto named = parse_tokenizer_config(
      R"({"chat_template": [{"name": "tool_use", "template": "T"},
                            {"name": "default", "template": "D"}]})",
      "x.json");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->chat_templates, (templates{{"tool_use", "T"}, {"default", "D"}}));
  auto tools_only = parse_tokenizer_config(
      R"({"chat_template": [{"name": "tool_use", "template": "T"}]})", "x.json");
  ASSERT_TRUE(tools_only);
  EXPECT_EQ(tools_only->chat_templates, (templates{{"tool_use", "T"}}));
}

namespace {

// A fresh folder with `files` (relative path -> text), removed at the end.
class folder {
 public:
  explicit folder(const std::vector<std::pair<std::string, std::string>>& files) {
    char pattern[] = "/tmp/conveyor-tokenizer-config-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) return;
    path_ = pattern;
    for (const auto& [name, text] : files) {
      const auto file = path_ / name;
      std::filesystem::create_directories(file.parent_path());
      std::ofstream{file} << text;
    }
  }
  ~folder() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  folder(const folder&) = delete;
  folder& operator=(const folder&) = delete;
  std::string path(const std::string& name = "") const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace

TEST(tokenizer_config, chat_templates_beside_prefer_files_to_the_field) {
  using templates = std::vector<std::pair<std::string, std::string>>;
  const std::string config = R"({"chat_template": "field"})";
  {
    folder f{{{"tokenizer.json", "{}"},
              {"tokenizer_config.json", config},
              {"chat_template.jinja", "file"}}};
    auto found = chat_templates_beside(f.path("tokenizer.json"));
    ASSERT_TRUE(found) << message_of(found.error());
    EXPECT_EQ(found->templates, (templates{{"default", "file"}}));
    EXPECT_EQ(found->origin, f.path("chat_template.jinja"));
    // A folder is looked into.
    EXPECT_EQ(chat_templates_beside(f.path())->templates, found->templates);
  }
  {
    folder f{{{"tokenizer_config.json", config},
              {"chat_template.jinja", "D"},
              {"additional_chat_templates/tool_use.jinja", "T"},
              {"additional_chat_templates/rag.jinja", "R"},
              {"additional_chat_templates/notes.txt", "ignored"}}};
    auto found = chat_templates_beside(f.path("tokenizer.json"));
    ASSERT_TRUE(found);
    EXPECT_EQ(found->templates, (templates{{"default", "D"}, {"rag", "R"}, {"tool_use", "T"}}));
  }
  {
    // Only a template for tools as a file: the field is not read.
    folder f{
        {{"tokenizer_config.json", config}, {"additional_chat_templates/tool_use.jinja", "T"}}};
    auto found = chat_templates_beside(f.path("tokenizer.json"));
    ASSERT_TRUE(found);
    EXPECT_EQ(found->templates, (templates{{"tool_use", "T"}}));
    EXPECT_EQ(found->origin, f.path("additional_chat_templates/"));
  }
  {
    folder f{{{"tokenizer_config.json", config}}};
    auto found = chat_templates_beside(f.path("tokenizer.json"));
    ASSERT_TRUE(found);
    EXPECT_EQ(found->templates, (templates{{"default", "field"}}));
    EXPECT_EQ(found->origin, f.path("tokenizer_config.json"));
  }
  {
    folder f{{{"tokenizer.json", "{}"}}};
    auto found = chat_templates_beside(f.path("tokenizer.json"));
    ASSERT_TRUE(found);
    EXPECT_TRUE(found->templates.empty());
    EXPECT_EQ(found->origin, "");
  }
  {
    folder f{{{"tokenizer_config.json", R"({"chat_template": 5})"}}};
    auto bad = chat_templates_beside(f.path("tokenizer.json"));
    ASSERT_FALSE(bad);
    EXPECT_NE(message_of(bad.error()).find("key 'chat_template'"), std::string::npos);
  }
}

TEST(tokenizer_config, errors_name_the_file_and_key) {
  auto bad_flag = parse_tokenizer_config(R"({"add_bos_token": "yes"})", "m/tokenizer_config.json");
  ASSERT_FALSE(bad_flag);
  EXPECT_EQ(code_of(bad_flag.error()), ec::bad_config);
  EXPECT_NE(message_of(bad_flag.error()).find("m/tokenizer_config.json: key 'add_bos_token'"),
            std::string::npos);
  auto bad_token = parse_tokenizer_config(R"({"eos_token": 7})", "m/tokenizer_config.json");
  ASSERT_FALSE(bad_token);
  EXPECT_NE(message_of(bad_token.error()).find("'eos_token'"), std::string::npos);
  auto bad_template = parse_tokenizer_config(R"({"chat_template": [{"name": 1}]})", "f.json");
  ASSERT_FALSE(bad_template);
  EXPECT_NE(message_of(bad_template.error()).find("'chat_template'"), std::string::npos);
  auto not_json = parse_tokenizer_config("{", "f.json");
  ASSERT_FALSE(not_json);
  EXPECT_EQ(code_of(not_json.error()), ec::bad_file);
  auto missing = read_tokenizer_config("/nonexistent/tokenizer_config.json");
  ASSERT_FALSE(missing);
  EXPECT_NE(message_of(missing.error()).find("/nonexistent/tokenizer_config.json"),
            std::string::npos);
}

}  // namespace conveyor::tokenizers
