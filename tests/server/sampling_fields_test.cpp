// The sampling fields of both endpoints (penalties, logit_bias, min_tokens, stop_token_ids,
// ignore_eos), token-id prompts, the refusal policy and /tokenize, /detokenize: parsed and
// refused without sockets.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.hpp"
#include "server/field_policy.hpp"
#include "server/openai.hpp"
#include "server/tokenize.hpp"

namespace conveyor::server {

namespace {

using json = nlohmann::json;

completion_defaults vocab(int32_t n) {
  completion_defaults d;
  d.vocab_size = n;
  return d;
}

completion_body parse_ok(const std::string& body, int32_t vocab_size = 512) {
  auto result = parse_completion_body(body, vocab(vocab_size), 8);
  if (auto* err = std::get_if<body_error>(&result)) {
    ADD_FAILURE() << body << ": " << err->message;
    return {};
  }
  return std::get<completion_body>(result);
}

body_error parse_error(const std::string& body, int32_t vocab_size = 512) {
  auto result = parse_completion_body(body, vocab(vocab_size), 8);
  if (auto* err = std::get_if<body_error>(&result)) return *err;
  ADD_FAILURE() << body << " was accepted";
  return {};
}

chat::chat_template simple_template() {
  auto t = chat::chat_template::parse(
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}",
      {"<s>", "</s>"});
  EXPECT_TRUE(t);
  return *t;
}

std::variant<completion_body, body_error> parse_chat(const std::string& body) {
  static const auto tmpl = simple_template();
  return parse_chat_body(body, vocab(512), tmpl);
}

}  // namespace

TEST(server_sampling_fields, absent_fields_change_nothing) {
  auto r = parse_ok(R"({"prompt": "p"})").requests.at(0);
  EXPECT_EQ(r.params.presence_penalty, 0.0f);
  EXPECT_EQ(r.params.frequency_penalty, 0.0f);
  EXPECT_EQ(r.params.repetition_penalty, 1.0f);
  EXPECT_TRUE(r.params.logit_bias.empty());
  EXPECT_EQ(r.params.min_tokens, 0);
  EXPECT_TRUE(r.params.stop_token_ids.empty());
  EXPECT_FALSE(r.params.ignore_eos);
  EXPECT_TRUE(r.prompt_tokens.empty());
  EXPECT_TRUE(r.add_bos);
}

TEST(server_sampling_fields, every_field_is_read) {
  auto body = parse_ok(R"({"prompt": ["a", "b"], "presence_penalty": -2, "frequency_penalty": 1.5,
      "repetition_penalty": 1.2, "logit_bias": {"7": -100, "511": 100, "0": 0.5},
      "max_tokens": 9, "min_tokens": 9, "stop_token_ids": [3, 4.0], "ignore_eos": true,
      "add_special_tokens": false})");
  ASSERT_EQ(body.requests.size(), 2u);
  for (const auto& r : body.requests) {
    EXPECT_EQ(r.params.presence_penalty, -2.0f);
    EXPECT_EQ(r.params.frequency_penalty, 1.5f);
    EXPECT_FLOAT_EQ(r.params.repetition_penalty, 1.2f);
    ASSERT_EQ(r.params.logit_bias.size(), 3u);
    // nlohmann's objects keep their keys sorted.
    EXPECT_EQ(r.params.logit_bias[0].id, 0);
    EXPECT_EQ(r.params.logit_bias[0].bias, 0.5f);
    EXPECT_EQ(r.params.logit_bias[1].id, 511);
    EXPECT_EQ(r.params.logit_bias[1].bias, 100.0f);
    EXPECT_EQ(r.params.logit_bias[2].id, 7);
    EXPECT_EQ(r.params.logit_bias[2].bias, -100.0f);
    EXPECT_EQ(r.params.min_tokens, 9);
    EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{3, 4}));
    EXPECT_TRUE(r.params.ignore_eos);
    EXPECT_FALSE(r.add_bos);
  }
}

TEST(server_sampling_fields, chat_reads_them_too_with_max_completion_tokens) {
  auto result = parse_chat(R"({"messages": [{"role": "user", "content": "hi"}],
      "frequency_penalty": 0.5, "logit_bias": {"5": -1}, "max_completion_tokens": 4,
      "min_tokens": 4, "stop_token_ids": [2], "ignore_eos": true, "add_generation_prompt": false})");
  ASSERT_TRUE(std::holds_alternative<completion_body>(result))
      << std::get<body_error>(result).message;
  const auto& r = std::get<completion_body>(result).requests.at(0);
  EXPECT_EQ(r.prompt, "<user>hi");
  EXPECT_EQ(r.params.max_tokens, 4);
  EXPECT_EQ(r.params.min_tokens, 4);
  EXPECT_EQ(r.params.frequency_penalty, 0.5f);
  EXPECT_EQ(r.params.logit_bias.at(0).id, 5);
  EXPECT_EQ(r.params.stop_token_ids, std::vector<int32_t>{2});
  EXPECT_TRUE(r.params.ignore_eos);
  auto over = parse_chat(R"({"messages": [{"role": "user", "content": "hi"}],
      "max_completion_tokens": 4, "min_tokens": 5})");
  ASSERT_TRUE(std::holds_alternative<body_error>(over));
  EXPECT_EQ(std::get<body_error>(over).param, "min_tokens");
}

TEST(server_sampling_fields, token_prompts_are_used_as_given) {
  auto one = parse_ok(R"({"prompt": [1, 403, 407]})");
  ASSERT_EQ(one.requests.size(), 1u);
  EXPECT_EQ(one.requests[0].prompt_tokens, (std::vector<int32_t>{1, 403, 407}));
  auto two = parse_ok(R"({"prompt": [[1, 2], [511]]})");
  ASSERT_EQ(two.requests.size(), 2u);
  EXPECT_EQ(two.requests[0].prompt_tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(two.requests[1].prompt_tokens, (std::vector<int32_t>{511}));
}

TEST(server_sampling_fields, refused_values_name_their_field) {
  struct bad_case {
    const char* body;
    const char* param;
  };
  const bad_case cases[] = {
      {R"({"prompt": "p", "presence_penalty": 2.5})", "presence_penalty"},
      {R"({"prompt": "p", "presence_penalty": "x"})", "presence_penalty"},
      {R"({"prompt": "p", "frequency_penalty": -2.01})", "frequency_penalty"},
      {R"({"prompt": "p", "repetition_penalty": 0})", "repetition_penalty"},
      {R"({"prompt": "p", "repetition_penalty": 2.5})", "repetition_penalty"},
      {R"({"prompt": "p", "logit_bias": [1, 2]})", "logit_bias"},
      {R"({"prompt": "p", "logit_bias": {"99999": 1}})", "logit_bias.99999"},
      {R"({"prompt": "p", "logit_bias": {"512": 1}})", "logit_bias.512"},
      {R"({"prompt": "p", "logit_bias": {"-1": 1}})", "logit_bias.-1"},
      {R"({"prompt": "p", "logit_bias": {"abc": 1}})", "logit_bias.abc"},
      {R"({"prompt": "p", "logit_bias": {"123456789012345678901234": 1}})",
       "logit_bias.123456789012345678901234"},
      {R"({"prompt": "p", "logit_bias": {"": 1}})", "logit_bias."},
      {R"({"prompt": "p", "logit_bias": {"5": 101}})", "logit_bias.5"},
      {R"({"prompt": "p", "logit_bias": {"5": "high"}})", "logit_bias.5"},
      // One token twice: "07" and "7" are both token 7 (the keys come in sorted order).
      {R"({"prompt": "p", "logit_bias": {"7": 1, "07": 2}})", "logit_bias.7"},
      {R"({"prompt": "p", "logit_bias": {"0": 1, "00": 1}})", "logit_bias.00"},
      {R"({"prompt": "p", "min_tokens": -1})", "min_tokens"},
      {R"({"prompt": "p", "max_tokens": 4, "min_tokens": 5})", "min_tokens"},
      {R"({"prompt": "p", "stop_token_ids": 3})", "stop_token_ids"},
      {R"({"prompt": "p", "stop_token_ids": [3, 512]})", "stop_token_ids[1]"},
      {R"({"prompt": "p", "stop_token_ids": [-1]})", "stop_token_ids[0]"},
      {R"({"prompt": "p", "stop_token_ids": [1.5]})", "stop_token_ids[0]"},
      {R"({"prompt": "p", "ignore_eos": 1})", "ignore_eos"},
      {R"({"prompt": "p", "add_special_tokens": "no"})", "add_special_tokens"},
      {R"({"prompt": [1, 512]})", "prompt[1]"},
      {R"({"prompt": [1, -3]})", "prompt[1]"},
      {R"({"prompt": [[1, 2], [3, 4, 5, 600]]})", "prompt[1][3]"},
      {R"({"prompt": [[1], []]})", "prompt[1]"},
      {R"({"prompt": [[1], "text"]})", "prompt[1]"},
      {R"({"prompt": ["text", [1]]})", "prompt[1]"},
      {R"({"prompt": [[1], [2], [3], [4], [5], [6], [7], [8], [9]]})", "prompt"},
      // Fields Conveyor does not apply, when they ask for more than the plain behaviour.
      {R"({"prompt": "p", "min_p": 0.1})", "min_p"},
      {R"({"prompt": "p", "use_beam_search": true})", "use_beam_search"},
      {R"({"prompt": "p", "guided_json": 5})", "guided_json"},
      {R"({"prompt": "p", "structured_outputs": {"regex": "a", "choice": ["b"]}})",
       "structured_outputs"},
      {R"({"prompt": "p", "structured_outputs": {"choice": []}})", "structured_outputs.choice"},
      {R"({"prompt": "p", "structured_outputs": {"choice": ["a", 1]}})",
       "structured_outputs.choice"},
      {R"({"prompt": "p", "structured_outputs": {"regex": ""}})", "structured_outputs.regex"},
      {R"({"prompt": "p", "structured_outputs": {"structural_tag": "x"}})",
       "structured_outputs.structural_tag"},
      {R"({"prompt": "p", "structured_outputs": {"json": "not json"}})", "structured_outputs.json"},
      {R"({"prompt": "p", "structured_outputs": {"regex": "a"}, "guided_regex": "b"})",
       "guided_regex"},
      {R"({"prompt": "p", "allowed_token_ids": [1]})", "allowed_token_ids"},
      {R"({"prompt": "p", "include_stop_str_in_output": true})", "include_stop_str_in_output"},
      {R"({"prompt": "p", "skip_special_tokens": false})", "skip_special_tokens"},
      {R"({"prompt": "p", "response_format": {"type": "xml"}})", "response_format.type"},
      {R"({"prompt": "p", "response_format": {"type": "json_schema"}})",
       "response_format.json_schema"},
      {R"({"prompt": "p", "response_format": {"type": "json_schema", "json_schema": {"schema": 1}}})",
       "response_format.json_schema.schema"},
      {R"({"prompt": "p", "prompt_logprobs": 1})", "prompt_logprobs"},
  };
  for (const auto& c : cases) {
    auto err = parse_error(c.body);
    EXPECT_EQ(err.param, c.param) << c.body << ": " << err.message;
    EXPECT_FALSE(err.message.empty());
  }
  // The index and the vocabulary are in the message.
  EXPECT_EQ(parse_error(R"({"prompt": [[1, 2], [3, 4, 5, 600]]})").message,
            "'prompt[1][3]' is outside the vocabulary (0..511), got 600");
  EXPECT_EQ(parse_error(R"({"prompt": "p", "logit_bias": {"99999": 1}})").message,
            "'logit_bias' token id 99999 is outside the vocabulary (0..511)");
  EXPECT_EQ(parse_error(R"({"prompt": "p", "logit_bias": {"7": 1, "07": 2}})").message,
            "'logit_bias' keys \"07\" and \"7\" are the same token id 7: give each token once");
}

TEST(server_sampling_fields, plain_values_of_unapplied_fields_are_accepted) {
  parse_ok(R"({"prompt": "p", "min_p": 0, "use_beam_search": false, "allowed_token_ids": [],
      "skip_special_tokens": true, "response_format": {"type": "text"}, "user": "u",
      "include_stop_str_in_output": false, "length_penalty": 1})");
}

TEST(server_sampling_fields, output_formats_become_the_requests_constraint) {
  using kind = sampling::structured_output::kind;
  auto constraint = [](const std::string& fields) {
    return parse_ok(R"({"prompt": "p", )" + fields + "}").requests.at(0).params.constraint;
  };
  EXPECT_FALSE(constraint(R"("response_format": {"type": "text"})").active());
  auto c = constraint(R"("response_format": {"type": "json_object"})");
  EXPECT_EQ(c.type, kind::json_schema);
  EXPECT_EQ(c.text, R"({"type":"object"})");
  EXPECT_EQ(c.field, "response_format");
  c = constraint(R"("response_format": {"type": "json_schema", "json_schema": {"name": "n",
      "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}})");
  EXPECT_EQ(c.type, kind::json_schema);
  EXPECT_EQ(c.text, R"({"type":"object","properties":{"a":{"type":"integer"}}})");
  // The properties keep the client's order (the output writes them in that order).
  c = constraint(
      R"("structured_outputs": {"json": {"properties": {"z": {}, "a": {}}, "type": "object"}})");
  EXPECT_EQ(c.text, R"({"properties":{"z":{},"a":{}},"type":"object"})");
  c = constraint(R"("structured_outputs": {"json": "{\"type\": \"array\"}"})");
  EXPECT_EQ(c.type, kind::json_schema);
  EXPECT_EQ(c.text, R"({"type":"array"})");
  EXPECT_EQ(c.field, "structured_outputs.json");
  c = constraint(R"("structured_outputs": {"regex": "[a-z]+", "choice": null})");
  EXPECT_EQ(c.type, kind::regex);
  EXPECT_EQ(c.text, "[a-z]+");
  EXPECT_EQ(c.field, "structured_outputs.regex");
  c = constraint(R"("structured_outputs": {"choice": ["yes", "no"]})");
  EXPECT_EQ(c.type, kind::choice);
  EXPECT_EQ(c.choices, (std::vector<std::string>{"yes", "no"}));
  c = constraint(R"("structured_outputs": {"grammar": "root ::= \"a\""})");
  EXPECT_EQ(c.type, kind::grammar);
  EXPECT_EQ(c.text, R"(root ::= "a")");
  c = constraint(R"("guided_choice": ["x"])");
  EXPECT_EQ(c.type, kind::choice);
  EXPECT_EQ(c.field, "guided_choice");
  // Each choice of n gets the same constraint.
  auto body = parse_ok(R"({"prompt": "p", "n": 2, "structured_outputs": {"regex": "a"}})");
  ASSERT_EQ(body.requests.size(), 2u);
  EXPECT_EQ(body.requests[1].params.constraint.text, "a");
}

TEST(server_sampling_fields, chat_refuses_what_it_does_not_apply) {
  struct bad_case {
    const char* extra;
    const char* param;
  };
  const bad_case cases[] = {
      {R"("tools": [{"type": "function"}])", "tools[0].function"},
      {R"("tool_choice": "required")", "tool_choice"},
      {R"("response_format": "json")", "response_format"},
      {R"("store": true)", "store"},
      {R"("audio": {"voice": "x"})", "audio"},
      {R"("modalities": ["text", "audio"])", "modalities"},
      {R"("reasoning_effort": "high")", "reasoning_effort"},
      {R"("service_tier": "flex")", "service_tier"},
      {R"("continue_final_message": true)", "continue_final_message"},
      {R"("chat_template": "{{ x }}")", "chat_template"},
      {R"("presence_penalty": 3)", "presence_penalty"},
      {R"("logit_bias": {"600": 1})", "logit_bias.600"},
      {R"("n": 17)", "n"},
  };
  for (const auto& c : cases) {
    auto body =
        std::string{R"({"messages": [{"role": "user", "content": "hi"}], )"} + c.extra + "}";
    auto result = parse_chat(body);
    ASSERT_TRUE(std::holds_alternative<body_error>(result)) << body;
    EXPECT_EQ(std::get<body_error>(result).param, c.param) << body;
  }
  auto fine = parse_chat(R"({"messages": [{"role": "user", "content": "hi"}], "tool_choice": "none",
      "tools": [], "user": "u", "metadata": {"a": "b"}, "store": false, "service_tier": "auto",
      "modalities": ["text"], "parallel_tool_calls": true})");
  EXPECT_TRUE(std::holds_alternative<completion_body>(fine));
}

TEST(server_sampling_fields, unknown_names_are_found_and_logged_once) {
  json obj = json::parse(R"({"prompt": "p", "temperature": 1, "frobnicate": 1, "zz_unknown": 2})");
  EXPECT_EQ(detail::unknown_fields(obj, api_kind::completions),
            (std::vector<std::string>{"frobnicate", "zz_unknown"}));
  // "messages" is a chat field: unknown to completions; "prompt" unknown to chat.
  EXPECT_EQ(detail::unknown_fields(json::parse(R"({"prompt": "p", "messages": []})"),
                                   api_kind::chat_completions),
            std::vector<std::string>{"prompt"});
  json once = json::parse(R"({"prompt": "p", "sampling_once_test_field": 1})");
  EXPECT_EQ(detail::log_unknown_fields(once, api_kind::completions),
            std::vector<std::string>{"sampling_once_test_field"});
  EXPECT_TRUE(detail::log_unknown_fields(once, api_kind::completions).empty());
  // An unknown field is accepted.
  parse_ok(R"({"prompt": "p", "some_future_field": {"x": 1}})");
}

// -- /tokenize and /detokenize
// ----------------------------------------------------------------------

namespace {

// A backend whose tokenizer gives each byte its value plus 3 (BOS = 1) and cannot finish
// "unfinishable".
class byte_backend final : public completion_backend {
 public:
  std::shared_ptr<request_handle> submit(completion_request, completion_events) override {
    return nullptr;
  }
  std::string model_name() const override { return "bytes"; }
  void collect_metrics(std::function<void(std::string)> reply) override { reply(""); }
  completion_defaults defaults() const override { return vocab(259); }
  bool has_tokenizer() const override { return true; }
  expected<std::vector<int32_t>> tokenize(const std::string& text, bool add_bos) const override {
    if (text == "unfinishable")
      return make_error(ec::bad_request, "bytes.json: pre_tokenizer Split: regex cannot finish");
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(1);
    for (unsigned char c : text) ids.push_back(int32_t(c) + 3);
    return ids;
  }
  std::string detokenize(const std::vector<int32_t>& ids) const override {
    std::string text;
    for (auto id : ids)
      if (id >= 3) text += char(id - 3);
    return text;
  }
  int32_t max_model_len() const override { return 77; }
};

json ok_json(const std::variant<std::string, detail::error_answer>& a) {
  if (auto* e = std::get_if<detail::error_answer>(&a)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  return json::parse(std::get<std::string>(a));
}

detail::error_answer refused(const std::variant<std::string, detail::error_answer>& a) {
  if (auto* e = std::get_if<detail::error_answer>(&a)) return *e;
  ADD_FAILURE() << "accepted: " << std::get<std::string>(a);
  return {};
}

}  // namespace

TEST(server_tokenize, prompt_and_chat_give_counts_and_tokens) {
  byte_backend b;
  auto tmpl = simple_template();
  auto j = ok_json(detail::answer_tokenize(R"({"prompt": "AB"})", b, &tmpl));
  EXPECT_EQ(j, json::parse(R"({"count": 3, "max_model_len": 77, "tokens": [1, 68, 69]})"));
  j = ok_json(
      detail::answer_tokenize(R"({"prompt": "AB", "add_special_tokens": false})", b, &tmpl));
  EXPECT_EQ(j["tokens"], json::parse("[68, 69]"));
  // Chat: the rendered template, tokenized adding no special tokens (it writes no bos_token, so
  // no BOS), unless add_special_tokens asks for them.
  j = ok_json(
      detail::answer_tokenize(R"({"messages": [{"role": "user", "content": "A"}]})", b, &tmpl));
  std::vector<int32_t> want;
  for (unsigned char c : std::string{"<user>A<assistant>"}) want.push_back(int32_t(c) + 3);
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), want);
  EXPECT_EQ(j["count"], want.size());
  j = ok_json(detail::answer_tokenize(
      R"({"messages": [{"role": "user", "content": "A"}], "add_generation_prompt": false})", b,
      &tmpl));
  EXPECT_EQ(j["count"], std::string{"<user>A"}.size());
  j = ok_json(detail::answer_tokenize(
      R"({"messages": [{"role": "user", "content": "A"}], "add_special_tokens": true})", b, &tmpl));
  EXPECT_EQ(j["count"], 1 + want.size());
}

TEST(server_tokenize, a_text_the_tokenizer_cannot_finish_is_refused_with_its_error) {
  byte_backend b;
  const auto e = refused(detail::answer_tokenize(R"({"prompt": "unfinishable"})", b, nullptr));
  EXPECT_EQ(e.status, 400u);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_EQ(e.message, "bytes.json: pre_tokenizer Split: regex cannot finish");
}

TEST(server_tokenize, detokenize_round_trips) {
  byte_backend b;
  auto j = ok_json(detail::answer_detokenize(R"({"tokens": [1, 68, 69]})", b));
  EXPECT_EQ(j, json::parse(R"({"prompt": "AB"})"));
}

TEST(server_tokenize, bad_bodies_name_the_field) {
  byte_backend b;
  auto tmpl = simple_template();
  EXPECT_EQ(refused(detail::answer_tokenize(R"({})", b, &tmpl)).param, "prompt");
  EXPECT_EQ(refused(detail::answer_tokenize(R"({"prompt": 5})", b, &tmpl)).param, "prompt");
  EXPECT_EQ(refused(detail::answer_tokenize(R"({"prompt": "a", "messages": []})", b, &tmpl)).param,
            "messages");
  EXPECT_EQ(
      refused(detail::answer_tokenize(R"({"messages": [{"role": "x", "content": "a"}]})", b, &tmpl))
          .param,
      "messages[0].role");
  EXPECT_EQ(
      refused(detail::answer_tokenize(R"({"prompt": "a", "add_special_tokens": 1})", b, &tmpl))
          .param,
      "add_special_tokens");
  EXPECT_EQ(refused(detail::answer_tokenize("not json", b, &tmpl)).status, 400u);
  EXPECT_EQ(refused(detail::answer_detokenize(R"({})", b)).param, "tokens");
  EXPECT_EQ(refused(detail::answer_detokenize(R"({"tokens": "x"})", b)).param, "tokens");
  EXPECT_EQ(refused(detail::answer_detokenize(R"({"tokens": [1, 259]})", b)).param, "tokens[1]");
  EXPECT_EQ(refused(detail::answer_detokenize(R"({"tokens": [1, "a"]})", b)).param, "tokens[1]");
  // Chat without a template: 400 saying so.
  auto no_template = refused(
      detail::answer_tokenize(R"({"messages": [{"role": "user", "content": "a"}]})", b, nullptr));
  EXPECT_EQ(no_template.status, 400u);
  EXPECT_NE(no_template.message.find("no chat template"), std::string::npos)
      << no_template.message;
}

}  // namespace conveyor::server
