// POST /v1/chat/completions over real sockets with the fake backend: the conversation rendered
// by the chat template reaches the backend as the prompt, answers come in OpenAI's chat shapes,
// whole and streamed, and bad conversations are 400s naming the field.
#include <gtest/gtest.h>

#include <memory>

#include <nlohmann/json.hpp>

#include "chat/chat_template.hpp"
#include "common/error.hpp"
#include "fake_backend.hpp"
#include "server/http_server.hpp"
#include "test_client.hpp"

namespace conveyor::server::test {

namespace {

using json = nlohmann::json;

// Words the fake backend echoes back: "user: Hello there ." and so on.
const char* const plain_template =
    "{% for m in messages %}{{ m.role }}: {{ m.content }} . {% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

const char* const bos_template =
    "{{ bos_token }} {% for m in messages %}{{ m.content }} {{ eos_token }} {% endfor %}"
    "{% if messages | length > 3 %}{{ raise_exception('at most 3 messages, got ' ~ "
    "messages | length) }}{% endif %}";

std::shared_ptr<const chat::chat_template> make_template(const char* source) {
  auto t = chat::chat_template::parse(source, {"<s>", "</s>"});
  EXPECT_TRUE(t) << message_of(t.error());
  return std::make_shared<const chat::chat_template>(*t);
}

class chat_test : public ::testing::Test {
 protected:
  void start(const char* source = plain_template) {
    server_options opts;
    opts.host = "127.0.0.1";
    opts.port = 0;
    if (source) opts.chat_template = make_template(source);
    server = std::make_unique<http_server>(opts, backend);
    ASSERT_FALSE(server->start());
    server->set_ready(true);
    port = server->port();
  }

  std::optional<http_reply> post(const std::string& body) {
    test_client c{port};
    return c.request("POST", "/v1/chat/completions", body);
  }

  void expect_400(const std::string& body, const json& param, const std::string& message = "") {
    auto reply = post(body);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 400u) << body << " -> " << reply->body;
    auto j = reply->json();
    EXPECT_EQ(j["error"]["type"], "invalid_request_error") << reply->body;
    EXPECT_EQ(j["error"]["param"], param) << reply->body;
    EXPECT_EQ(j["error"]["code"], "bad_request") << reply->body;
    if (!message.empty()) {
      EXPECT_EQ(j["error"]["message"], message);
    }
  }

  fake_backend backend;
  std::unique_ptr<http_server> server;
  uint16_t port = 0;
};

const std::string conversation = R"([{"role": "system", "content": "Be brief"},
                                     {"role": "user", "content": "Hello there"}])";
const std::string rendered = "system: Be brief . user: Hello there . assistant:";

}  // namespace

TEST_F(chat_test, whole_answer_is_a_chat_completion_of_the_rendered_prompt) {
  start();
  auto reply = post(R"({"model": "fake-model", "max_tokens": 4, "messages": )" + conversation +
                    "}");
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200u) << reply->body;
  auto j = reply->json();
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_TRUE(j["created"].is_number_integer());
  EXPECT_EQ(j["model"], "fake-model");
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0], json({{"index", 0},
                                   {"message",
                                    {{"role", "assistant"}, {"content", expected_text(rendered, 4)}}},
                                   {"logprobs", nullptr},
                                   {"finish_reason", "length"}}));
  EXPECT_EQ(j["usage"], json::parse(R"({"prompt_tokens": 9, "completion_tokens": 4,
                                        "total_tokens": 13,
                                        "prompt_tokens_details": {"cached_tokens": 0}})"));
  auto reqs = backend.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].prompt, rendered);
  // Rendered, then tokenized adding no special tokens, as transformers' apply_chat_template and
  // vLLM do: a template that writes no bos_token gets no BOS.
  EXPECT_FALSE(reqs[0].add_bos);
  EXPECT_EQ(reqs[0].params.max_tokens, 4);
}

TEST_F(chat_test, a_template_that_writes_bos_gets_no_second_bos) {
  start(bos_template);
  auto reply = post(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                        {"type": "text", "text": "b"}]}], "max_completion_tokens": 2,
                        "max_tokens": 9})");
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200u) << reply->body;
  auto reqs = backend.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].prompt, "<s> a\nb </s> ");  // text parts joined by newlines
  EXPECT_FALSE(reqs[0].add_bos);
  EXPECT_EQ(reqs[0].params.max_tokens, 2);  // max_completion_tokens wins over max_tokens
  EXPECT_EQ(reply->json()["choices"][0]["message"]["content"], "<s> a");
}

TEST_F(chat_test, streamed_answer_opens_with_the_role_and_ends_with_the_reason) {
  start();
  auto whole = post(R"({"max_tokens": 5, "messages": )" + conversation + "}");
  ASSERT_TRUE(whole);
  auto text = whole->json()["choices"][0]["message"]["content"].get<std::string>();

  auto reply = post(R"({"max_tokens": 5, "stream": true, "stream_options": {"include_usage": true},
                        "messages": )" + conversation + "}");
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200u);
  EXPECT_EQ(reply->header("content-type"), "text/event-stream");
  auto events = sse_events(reply->body);
  ASSERT_EQ(events.size(), 1u + 5u + 1u + 1u + 1u);  // role, 5 tokens, finish, usage, [DONE]
  std::string id = events[0]["id"];
  EXPECT_EQ(id.rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(events[0]["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  std::string streamed;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i]["object"], "chat.completion.chunk");
    EXPECT_EQ(events[i]["id"], id);
    if (i >= 1 && i <= 5) {
      EXPECT_TRUE(events[i]["choices"][0]["finish_reason"].is_null());
      streamed += events[i]["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(events[6]["choices"][0]["delta"], json::object());
  EXPECT_EQ(events[6]["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(events[7]["choices"].empty());
  EXPECT_EQ(events[7]["usage"]["completion_tokens"], 5);
  EXPECT_EQ(events.back(), "[DONE]");
}

TEST_F(chat_test, usage_has_the_prompt_tokens_the_backend_read_from_its_cache) {
  start();
  fake_backend::settings s;
  s.cached_tokens = 6;
  backend.configure(s);
  const json usage = json::parse(R"({"prompt_tokens": 9, "completion_tokens": 4,
                                     "total_tokens": 13,
                                     "prompt_tokens_details": {"cached_tokens": 6}})");
  auto whole = post(R"({"max_tokens": 4, "messages": )" + conversation + "}");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200u) << whole->body;
  EXPECT_EQ(whole->json()["usage"], usage);
  auto streamed = post(R"({"max_tokens": 4, "stream": true, "stream_options":
                           {"include_usage": true}, "messages": )" +
                       conversation + "}");
  ASSERT_TRUE(streamed);
  auto events = sse_events(streamed->body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_TRUE(events[events.size() - 2]["choices"].empty());
  EXPECT_EQ(events[events.size() - 2]["usage"], usage);
}

TEST_F(chat_test, bad_conversations_are_400_naming_the_field) {
  start(bos_template);
  expect_400(R"({"max_tokens": 3})", "messages", "'messages' is required");
  expect_400(R"({"messages": "hi"})", "messages", "'messages' must be an array, got string");
  expect_400(R"({"messages": []})", "messages", "'messages' must not be empty");
  expect_400(
      R"({"messages": [{"role": "developer", "content": "x"}]})", "messages[0].role",
      R"('messages[0].role' must be "system", "user", "assistant" or "tool", got "developer")");
  expect_400(R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].tool_call_id",
             "'messages[0].tool_call_id' must be a string");
  expect_400(R"({"messages": [{"role": "user", "content": "x"}, {"role": "user"}]})",
             "messages[1].content", "'messages[1].content' is required");
  expect_400(R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content");
  expect_400(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
             "messages[0].content[0].type");
  expect_400(R"({"messages": [{"role": "user", "content": "x"}], "n": 17})", "n",
             "'n' must be at most 16 (server.max_n), got 17");
  expect_400(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 1})", "logprobs");
  expect_400(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
             "top_logprobs", "'top_logprobs' needs 'logprobs': true");
  expect_400(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true,
                 "top_logprobs": 21})",
             "top_logprobs");
  expect_400(R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})",
             "max_completion_tokens");
  expect_400(R"({"messages": [{"role": "user", "content": "x"}], "temperature": 3})",
             "temperature");
  expect_400(R"({"messages": [{"role": "user", "content": "x"}], "stream_options": {}})",
             "stream_options");
  // The template's own refusal (raise_exception) names its message.
  expect_400(R"({"messages": [{"role": "user", "content": "1"}, {"role": "assistant",
                 "content": "2"}, {"role": "user", "content": "3"}, {"role": "assistant",
                 "content": "4"}]})",
             "messages", "the chat template refused the conversation: at most 3 messages, got 4");
  EXPECT_EQ(backend.submitted(), 0);
}

TEST_F(chat_test, without_a_template_chat_is_a_400_that_says_so) {
  start(nullptr);
  auto reply = post(R"({"messages": [{"role": "user", "content": "x"}]})");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 400u) << reply->body;
  auto j = reply->json();
  EXPECT_EQ(j["error"]["type"], "invalid_request_error") << reply->body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find("no chat template"), std::string::npos)
      << reply->body;
  EXPECT_EQ(backend.submitted(), 0);
}

}  // namespace conveyor::server::test
