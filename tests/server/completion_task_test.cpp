// completion_task without sockets: a prompt array fans out into one backend request per choice,
// and backend steps become the client's stream events or whole answer.
#include "server/completion_task.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "task_steps.hpp"

namespace conveyor::server::test {
namespace {

using json = nlohmann::json;
using detail::completion_task;

// Records what is submitted; never answers (the test plays the backend's events itself).
class recording_backend final : public completion_backend {
 public:
  struct handle final : request_handle {
    void cancel() override { cancelled = true; }
    bool cancelled = false;
  };
  std::shared_ptr<request_handle> submit(completion_request req, completion_events) override {
    prompts.push_back(req.prompt);
    handles.push_back(std::make_shared<handle>());
    if (throw_at && prompts.size() == *throw_at) throw std::runtime_error("no room");
    return handles.back();
  }
  std::string model_name() const override { return "m"; }
  void collect_metrics(std::function<void(std::string)> reply) override { reply(""); }
  std::vector<std::string> prompts;
  std::vector<std::shared_ptr<handle>> handles;
  std::optional<std::size_t> throw_at;
};

std::vector<completion_request> prompts(std::initializer_list<const char*> texts) {
  std::vector<completion_request> out;
  for (const char* t : texts) {
    out.emplace_back();
    out.back().prompt = t;
  }
  return out;
}

completion_meta meta(api_kind kind) {
  completion_meta m;
  m.id = "cmpl-x";
  m.created = 7;
  m.model = "m";
  m.kind = kind;
  return m;
}

completion_events no_events(std::size_t) {
  return {};
}

TEST(completion_task, a_prompt_array_fans_out_and_answers_once_all_choices_finished) {
  recording_backend backend;
  completion_task task{1, meta(api_kind::completions), false, false, 2};
  ASSERT_EQ(task.submit(backend, prompts({"a", "b"}), no_events), std::nullopt);
  EXPECT_EQ(backend.prompts, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(send_text(task, 1, " two").events.empty());
  EXPECT_TRUE(send_text(task, 0, " one").events.empty());
  auto first = send_finish(task, 1, "length", {1, 1});
  EXPECT_FALSE(first.finished);
  EXPECT_FALSE(task.accepts(1)) << "a finished choice takes no more events";
  auto last = send_finish(task, 0, "stop", {2, 1});
  ASSERT_TRUE(last.finished);
  auto j = json::parse(last.body);
  EXPECT_EQ(j["choices"][0]["text"], " one");
  EXPECT_EQ(j["choices"][1]["text"], " two");
  EXPECT_EQ(j["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["total_tokens"], 5);
}

TEST(completion_task, n_choices_count_their_prompt_once_in_the_usage) {
  // Two prompts with two choices each (n = 2): prompts of 5 and 3 tokens, as OpenAI counts them.
  // The cached prompt tokens count once per prompt too, those of its first choice: 2 of the
  // first prompt (its second choice found 4), 0 of the second (its second choice found 3).
  for (bool stream : {true, false}) {
    recording_backend backend;
    completion_task task{1, meta(api_kind::completions), stream, true, 4, 2};
    ASSERT_EQ(task.submit(backend, prompts({"a", "a", "b", "b"}), no_events), std::nullopt);
    send_finish(task, 0, "length", {5, 2, 2});
    send_finish(task, 1, "length", {5, 2, 4});
    send_finish(task, 3, "stop", {3, 1, 3});
    auto end = send_finish(task, 2, "length", {3, 2, 0});
    ASSERT_TRUE(end.finished);
    auto usage = stream ? json::parse(end.events[end.events.size() - 2])["usage"]
                        : json::parse(end.body)["usage"];
    EXPECT_EQ(usage["prompt_tokens"], 8);
    EXPECT_EQ(usage["completion_tokens"], 7);
    EXPECT_EQ(usage["total_tokens"], 15);
    EXPECT_EQ(usage["prompt_tokens_details"], json({{"cached_tokens", 2}}));
  }
}

TEST(completion_task, a_chat_stream_sends_the_role_first_then_usage_and_done) {
  recording_backend backend;
  completion_task task{1, meta(api_kind::chat_completions), true, true, 1};
  ASSERT_EQ(task.submit(backend, prompts({"a"}), no_events), std::nullopt);
  auto text = send_text(task, 0, "Hi");
  ASSERT_EQ(text.events.size(), 2u);
  EXPECT_EQ(json::parse(text.events[0])["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(json::parse(text.events[1])["choices"][0]["delta"]["content"], "Hi");
  auto end = send_finish(task, 0, "stop", {3, 1});
  ASSERT_TRUE(end.finished);
  ASSERT_EQ(end.events.size(), 3u);
  EXPECT_EQ(json::parse(end.events[0])["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(json::parse(end.events[1])["usage"]["total_tokens"], 4);
  EXPECT_EQ(end.events[2], "[DONE]");
}

TEST(completion_task, each_choices_first_stream_event_is_marked_as_opening_it) {
  // The connection's stream pacer never holds a choice's first event (its time to first token).
  recording_backend backend;
  completion_task task{1, meta(api_kind::chat_completions), true, false, 3};
  ASSERT_EQ(task.submit(backend, prompts({"a", "b", "c"}), no_events), std::nullopt);
  auto first = send_text(task, 0, "Hi");
  EXPECT_EQ(first.events.size(), 2u) << "the role chunk, then the text";
  EXPECT_TRUE(first.opens_choice);
  EXPECT_FALSE(send_text(task, 0, " there").opens_choice);
  EXPECT_FALSE(send_text(task, 1, "").opens_choice) << "an empty text writes nothing";
  EXPECT_TRUE(send_text(task, 1, "Yo").opens_choice) << "choice 1's first event";
  EXPECT_FALSE(send_finish(task, 1, "stop", {1, 1}).opens_choice);
  auto only_end = send_finish(task, 2, "length", {1, 0});
  EXPECT_TRUE(only_end.opens_choice) << "a choice whose first event is its end";
  EXPECT_FALSE(only_end.finished);
}

TEST(completion_task, a_plain_answer_marks_no_stream_event) {
  recording_backend backend;
  completion_task task{1, meta(api_kind::completions), false, false, 1};
  ASSERT_EQ(task.submit(backend, prompts({"a"}), no_events), std::nullopt);
  EXPECT_FALSE(send_text(task, 0, "Hi").opens_choice);
  EXPECT_FALSE(send_finish(task, 0, "stop", {1, 1}).opens_choice);
}

TEST(completion_task, a_whole_step_writes_its_parts_in_order) {
  // Log-probabilities, text and the end of one step: the role chunk, the text with its tokens'
  // log-probabilities, the last chunk and "[DONE]", counted as one delivery.
  recording_backend backend;
  completion_task task{1, meta(api_kind::chat_completions), true, false, 1};
  auto requests = prompts({"a"});
  requests[0].params.logprobs = 0;
  ASSERT_EQ(task.submit(backend, std::move(requests), no_events), std::nullopt);
  completion_step step;
  step.logprobs = {{"Hi", -0.5f, {}}};
  step.text = "Hi";
  step.end = completion_step::end_kind::finished;
  step.finish_reason = "stop";
  step.usage = {1, 1};
  auto out = send_step(task, 0, std::move(step));
  EXPECT_TRUE(out.finished);
  EXPECT_TRUE(out.opens_choice);
  EXPECT_FALSE(out.failure);
  ASSERT_EQ(out.events.size(), 4u);
  EXPECT_EQ(out.event_count, 4u);
  EXPECT_EQ(json::parse(out.events[0])["choices"][0]["delta"]["role"], "assistant");
  auto text = json::parse(out.events[1])["choices"][0];
  EXPECT_EQ(text["delta"]["content"], "Hi");
  EXPECT_EQ(text["logprobs"]["content"][0]["token"], "Hi");
  EXPECT_EQ(json::parse(out.events[2])["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(out.events[3], "[DONE]");
}

TEST(completion_task, a_failed_step_writes_its_text_then_ends_its_choice_with_the_failure) {
  recording_backend backend;
  completion_task task{1, meta(api_kind::completions), true, false, 2};
  ASSERT_EQ(task.submit(backend, prompts({"a", "b"}), no_events), std::nullopt);
  completion_step step;
  step.text = "Hi";
  step.end = completion_step::end_kind::failed;
  step.code = ec::executor_lost;
  step.message = "lost";
  auto out = send_step(task, 1, std::move(step));
  ASSERT_TRUE(out.failure);
  EXPECT_EQ(out.failure->code, ec::executor_lost);
  EXPECT_EQ(out.failure->message, "lost");
  EXPECT_FALSE(out.finished);
  ASSERT_EQ(out.events.size(), 1u) << "the text before the failure";
  EXPECT_EQ(out.event_count, 1u);
  EXPECT_EQ(json::parse(out.events[0])["choices"][0]["text"], "Hi");
  EXPECT_FALSE(task.accepts(1)) << "the failed choice ended";
  EXPECT_TRUE(task.accepts(0));
  EXPECT_FALSE(backend.handles[1]->cancelled) << "the failed choice ended on its own";
}

TEST(completion_task, a_step_of_an_ended_choice_is_ignored) {
  recording_backend backend;
  completion_task task{1, meta(api_kind::completions), true, false, 2};
  ASSERT_EQ(task.submit(backend, prompts({"a", "b"}), no_events), std::nullopt);
  send_finish(task, 0, "stop", {1, 1});
  auto late = send_text(task, 0, "late");
  EXPECT_TRUE(late.events.empty());
  EXPECT_EQ(late.event_count, 0u);
  auto beyond = send_text(task, 5, "no such choice");
  EXPECT_TRUE(beyond.events.empty());
}

TEST(completion_task, a_backend_that_throws_is_named_and_cancel_reaches_the_running_choices) {
  recording_backend backend;
  backend.throw_at = 2;
  completion_task task{1, meta(api_kind::completions), false, false, 3};
  auto failure = task.submit(backend, prompts({"a", "b", "c"}), no_events);
  EXPECT_EQ(failure, "the backend failed to take the request: no room");
  EXPECT_EQ(backend.prompts.size(), 2u) << "the third choice is never submitted";
  task.cancel();
  EXPECT_TRUE(backend.handles[0]->cancelled);
}

}  // namespace
}  // namespace conveyor::server::test
