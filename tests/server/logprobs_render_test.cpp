// logprobs and echo in OpenAI's shapes, without sockets: parsing of the fields, and the
// completion_task turning the backend's log-probability events into whole answers and stream
// chunks (completions' tokens/token_logprobs/top_logprobs/text_offset, chat's content[]).
#include <cmath>
#include <limits>
#include <variant>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/completion_task.hpp"
#include "server/openai.hpp"
#include "task_steps.hpp"

namespace conveyor::server::test {
namespace {

using json = nlohmann::json;
using detail::completion_task;

class null_backend final : public completion_backend {
 public:
  struct handle final : request_handle {
    void cancel() override {}
  };
  std::shared_ptr<request_handle> submit(completion_request req, completion_events) override {
    submitted.push_back(std::move(req));
    return std::make_shared<handle>();
  }
  std::string model_name() const override { return "m"; }
  void collect_metrics(std::function<void(std::string)> reply) override { reply(""); }
  std::vector<completion_request> submitted;
};

completion_meta meta(api_kind kind) {
  completion_meta m;
  m.id = "cmpl-x";
  m.created = 7;
  m.model = "m";
  m.kind = kind;
  return m;
}

completion_request parsed(const std::string& body) {
  auto r = parse_completion_body(body, {}, 8);
  if (auto* e = std::get_if<body_error>(&r)) ADD_FAILURE() << body << ": " << e->message;
  return std::get<completion_body>(r).requests.at(0);
}

const float nan = std::numeric_limits<float>::quiet_NaN();
const float inf = std::numeric_limits<float>::infinity();

// The prompt "Hi é" as BOS, "Hi", " é"; then the completion " ok" and an end token.
std::vector<token_logprob> prompt_entries() {
  return {{"", nan, {}},
          {"Hi", -1.5f, {{"Hi", -1.5f}, {"Oh", -2.0f}}},
          {" é", -0.25f, {{" é", -0.25f}, {" a", -inf}}}};
}

std::vector<token_logprob> completion_entries() {
  return {{" ok", -0.5f, {{" ok", -0.5f}, {"!", -3.0f}}}};
}

std::vector<token_logprob> end_entry() {
  return {{"", -0.125f, {{"", -0.125f}, {" ok", -4.0f}}}};
}

}  // namespace

TEST(server_logprobs, fields_are_parsed) {
  auto r = parsed(R"({"prompt": "p", "logprobs": 3, "echo": true, "max_tokens": 0})");
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_TRUE(r.params.echo);
  EXPECT_TRUE(r.params.prompt_logprobs);
  EXPECT_EQ(r.params.max_tokens, 0);
  r = parsed(R"({"prompt": "p", "logprobs": 0})");
  EXPECT_EQ(r.params.logprobs, 0);
  EXPECT_FALSE(r.params.echo);
  EXPECT_FALSE(r.params.prompt_logprobs);
  r = parsed(R"({"prompt": "p", "echo": true, "max_tokens": 5})");
  EXPECT_EQ(r.params.logprobs, -1);
  EXPECT_TRUE(r.params.echo);
  EXPECT_FALSE(r.params.prompt_logprobs);
  EXPECT_EQ(r.params.max_tokens, 5);
  r = parsed(R"({"prompt": "p", "logprobs": null, "echo": false})");
  EXPECT_EQ(r.params.logprobs, -1);
  EXPECT_FALSE(r.params.echo);
}

TEST(server_logprobs, completion_with_echo_whole) {
  null_backend backend;
  completion_task task{1, meta(api_kind::completions), false, false, 1};
  task.submit(backend, {parsed(R"({"prompt": "Hi é", "logprobs": 1, "echo": true})")},
              [](std::size_t) { return completion_events{}; });
  EXPECT_TRUE(send_logprobs(task, 0, prompt_entries(), true).events.empty());
  send_logprobs(task, 0, completion_entries(), false);
  send_text(task, 0, " ok");
  send_logprobs(task, 0, end_entry(), false);
  auto out = send_finish(task, 0, "stop", {3, 1});
  ASSERT_TRUE(out.finished);
  const auto choice = json::parse(out.body)["choices"][0];
  EXPECT_EQ(choice["text"], "Hi é ok");
  EXPECT_EQ(choice["logprobs"], json::parse(R"({
    "tokens": ["", "Hi", " é", " ok", ""],
    "token_logprobs": [null, -1.5, -0.25, -0.5, -0.125],
    "top_logprobs": [null, {"Hi": -1.5, "Oh": -2.0}, {" é": -0.25, " a": -9999.0},
                     {" ok": -0.5, "!": -3.0}, {"": -0.125, " ok": -4.0}],
    "text_offset": [0, 0, 2, 4, 7]
  })")) << choice;
}

TEST(server_logprobs, completion_with_echo_streamed) {
  null_backend backend;
  completion_task task{1, meta(api_kind::completions), true, false, 1};
  task.submit(backend, {parsed(R"({"prompt": "Hi é", "logprobs": 0, "echo": true})")},
              [](std::size_t) { return completion_events{}; });
  // The echoed prompt is the first chunk, with its tokens' log-probabilities.
  auto first = send_logprobs(task, 0, prompt_entries(), true);
  ASSERT_EQ(first.events.size(), 1u);
  auto c0 = json::parse(first.events[0])["choices"][0];
  EXPECT_EQ(c0["text"], "Hi é");
  EXPECT_EQ(c0["logprobs"]["tokens"], json::parse(R"(["", "Hi", " é"])"));
  EXPECT_EQ(c0["logprobs"]["text_offset"], json::parse("[0, 0, 2]"));
  // A chunk's log-probabilities go with its text.
  EXPECT_TRUE(send_logprobs(task, 0, completion_entries(), false).events.empty());
  auto second = send_text(task, 0, " ok");
  ASSERT_EQ(second.events.size(), 1u);
  auto c1 = json::parse(second.events[0])["choices"][0];
  EXPECT_EQ(c1["text"], " ok");
  EXPECT_EQ(c1["logprobs"], json::parse(R"({"tokens": [" ok"], "token_logprobs": [-0.5],
    "top_logprobs": [{" ok": -0.5, "!": -3.0}], "text_offset": [4]})"));
  // The end token's comes with the last chunk.
  send_logprobs(task, 0, end_entry(), false);
  auto last = send_finish(task, 0, "stop", {3, 1});
  ASSERT_EQ(last.events.size(), 2u);
  auto c2 = json::parse(last.events[0])["choices"][0];
  EXPECT_EQ(c2["finish_reason"], "stop");
  EXPECT_EQ(c2["logprobs"]["tokens"], json::parse(R"([""])"));
  EXPECT_EQ(c2["logprobs"]["text_offset"], json::parse("[7]"));
  EXPECT_EQ(last.events[1], "[DONE]");
}

TEST(server_logprobs, echo_without_logprobs_and_max_tokens_zero) {
  null_backend backend;
  completion_task task{1, meta(api_kind::completions), false, false, 1};
  task.submit(backend, {parsed(R"({"prompt": "Hi", "echo": true, "max_tokens": 0})")},
              [](std::size_t) { return completion_events{}; });
  EXPECT_EQ(backend.submitted.at(0).params.max_tokens, 0);
  auto out = send_finish(task, 0, "length", {2, 0});
  const auto choice = json::parse(out.body)["choices"][0];
  EXPECT_EQ(choice["text"], "Hi");
  EXPECT_TRUE(choice["logprobs"].is_null());
}

TEST(server_logprobs, chat_content_whole_and_streamed) {
  for (bool stream : {false, true}) {
    null_backend backend;
    completion_task task{1, meta(api_kind::chat_completions), stream, false, 1};
    completion_request req;
    req.params.logprobs = 2;
    task.submit(backend, {req}, [](std::size_t) { return completion_events{}; });
    send_logprobs(task, 0, completion_entries(), false);
    auto text = send_text(task, 0, " ok");
    auto out = send_finish(task, 0, "length", {3, 1});
    const auto expected = json::parse(R"({"content": [{"token": " ok", "logprob": -0.5,
      "bytes": [32, 111, 107], "top_logprobs": [
        {"token": " ok", "logprob": -0.5, "bytes": [32, 111, 107]},
        {"token": "!", "logprob": -3.0, "bytes": [33]}]}]})");
    if (!stream) {
      EXPECT_EQ(json::parse(out.body)["choices"][0]["logprobs"], expected);
      continue;
    }
    ASSERT_EQ(text.events.size(), 2u);  // the role chunk, then the text with its logprobs
    EXPECT_TRUE(json::parse(text.events[0])["choices"][0]["logprobs"].is_null());
    EXPECT_EQ(json::parse(text.events[1])["choices"][0]["logprobs"], expected);
    EXPECT_TRUE(json::parse(out.events[0])["choices"][0]["logprobs"].is_null());
  }
}

}  // namespace conveyor::server::test
