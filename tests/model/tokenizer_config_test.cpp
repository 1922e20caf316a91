// tokenizer_config.json: the token keys in both spellings, the flags, the chat template as a
// string or a named list, and the errors that name the file and key.
#include "model/tokenizer_config.hpp"

#include <gtest/gtest.h>

namespace conveyor::model {

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
  EXPECT_EQ(cfg->chat_template, "{{ messages }}");
  EXPECT_EQ(cfg->model_max_length, std::optional<long long>{2048});
}

TEST(tokenizer_config, absent_keys_keep_defaults_and_huge_max_length_is_none) {
  auto cfg = parse_tokenizer_config(R"({"model_max_length": 1e30})", "x.json");
  ASSERT_TRUE(cfg);
  EXPECT_EQ(cfg->bos_token, "");
  EXPECT_FALSE(cfg->add_bos_token.has_value());
  EXPECT_FALSE(cfg->model_max_length.has_value());
  EXPECT_EQ(cfg->chat_template, "");
}

TEST(tokenizer_config, chat_template_list_takes_default_else_first) {
  auto named = parse_tokenizer_config(
      R"({"chat_template": [{"name": "tool_use", "template": "T"},
                            {"name": "default", "template": "D"}]})",
      "x.json");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->chat_template, "D");
  auto first =
      parse_tokenizer_config(R"({"chat_template": [{"name": "rag", "template": "R"}]})", "x.json");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->chat_template, "R");
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

}  // namespace conveyor::model
