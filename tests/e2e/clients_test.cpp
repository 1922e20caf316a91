// Clients that nobody here wrote get the reference text: curl (whole and streamed) and the
// official `openai` Python package (tools/venv, pinned in tools/requirements-tests.txt).
#include <gtest/gtest.h>

#include <chrono>

#include "tests/e2e/conveyor_process.hpp"

namespace conveyor::e2e {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const char* const greedy_60 =
    R"({"prompt": "Once upon a time", "max_tokens": 60, "temperature": 0})";
const char* const greedy_60_streamed =
    R"({"prompt": "Once upon a time", "max_tokens": 60, "temperature": 0, "stream": true})";

TEST(e2e_clients, curl_whole_and_streamed) {
  ASSERT_EQ(run_shell("command -v curl >/dev/null").status, 0)
      << "curl is missing: run scripts/setup.sh --tests";
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  const auto url = shell_quote(server.url() + "/v1/completions");
  const std::string json_header = " -H 'Content-Type: application/json' -d ";

  auto whole = run_shell("curl -sS --fail-with-body " + url + json_header + shell_quote(greedy_60));
  ASSERT_EQ(whole.status, 0) << whole.out;
  const auto body = json::parse(whole.out, nullptr, false);
  EXPECT_EQ(body["choices"][0]["text"], expected_once_upon_a_time()) << whole.out;
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["total_tokens"], 65);

  auto streamed = run_shell("curl -sSN --fail-with-body " + url + json_header +
                            shell_quote(greedy_60_streamed));
  ASSERT_EQ(streamed.status, 0) << streamed.out;
  const auto events = sse_events(streamed.out);
  ASSERT_GE(events.size(), 2u) << streamed.out;
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(stream_text(events), expected_once_upon_a_time()) << streamed.out;

  auto models = run_shell("curl -sS " + shell_quote(server.url() + "/v1/models"));
  EXPECT_EQ(json::parse(models.out, nullptr, false)["data"][0]["id"], "stories260K") << models.out;
  auto health =
      run_shell("curl -sS -o /dev/null -w '%{http_code}' " + shell_quote(server.url() + "/health"));
  EXPECT_EQ(health.out, "200");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Runs tests/e2e/openai_client.py SCENARIO with the `openai` Python package of tools/venv
// against `server`; its JSON output.
json run_openai_client(const conveyor_process& server, const std::string& scenario) {
  auto run = run_shell(shell_quote(CONVEYOR_TEST_PYTHON) + " " CONVEYOR_SOURCE_DIR
                       "/tests/e2e/openai_client.py " + shell_quote(server.url() + "/v1") + " " +
                       scenario + " 2>&1");
  EXPECT_EQ(run.status, 0) << run.out;
  auto result = json::parse(run.out, nullptr, false);
  EXPECT_TRUE(result.is_object()) << run.out;
  return result;
}

// What the client raised: its exception class, the status and the error body's fields.
json raised(const std::string& exception_class, int status, const std::string& type,
            const json& param, const std::string& code, const std::string& message) {
  return json{{"class", exception_class}, {"status", status}, {"type", type},
              {"param", param},           {"code", code},     {"message", message}};
}

class e2e_openai_python : public ::testing::Test {
 protected:
  void SetUp() override {
    // A missing client fails the test: scripts/setup.sh --tests installs it.
    ASSERT_EQ(run_shell(shell_quote(CONVEYOR_TEST_PYTHON) + " -c 'import openai' 2>&1").status, 0)
        << "the openai Python package is missing in " CONVEYOR_TEST_PYTHON
           ": run scripts/setup.sh --tests";
  }
};

// The prompt tokens a request finds in the prefix cache when a request before it had the same
// first `prompt_tokens` tokens: every full block of 16 but the one holding its last token.
int64_t cached_after_the_same(int64_t prompt_tokens) {
  return (prompt_tokens - 1) / 16 * 16;
}

// usage.prompt_tokens_details.cached_tokens as the openai package's typed fields read it: 0 on a
// fresh server; a second turn finds at least the blocks of the first turn's prompt (which it
// begins with), whole and streamed alike, with the same text; a completion prompt sent again
// finds every block but its last token's and gives the same text.
TEST_F(e2e_openai_python, usage_reports_the_prompt_tokens_found_in_the_prefix_cache) {
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  const auto result = run_openai_client(server, "cached");
  const auto& turn1 = result["turn1"];
  EXPECT_EQ(turn1["cached_tokens"], 0);
  const int64_t p1 = turn1["prompt_tokens"];
  ASSERT_GT(p1, 48);
  const auto& turn2 = result["turn2"]["usage"];
  const int64_t p2 = turn2["prompt_tokens"], cached = turn2["cached_tokens"];
  EXPECT_GT(p2, p1);
  EXPECT_GE(cached, p1 / 16 * 16);
  EXPECT_LT(cached, p2);
  EXPECT_EQ(cached % 16, 0);
  // The streamed second turn is the same request again: all of it but its last token's block.
  const auto& streamed = result["turn2_streamed"]["usage"];
  EXPECT_EQ(streamed["prompt_tokens"], p2);
  EXPECT_EQ(streamed["completion_tokens"], turn2["completion_tokens"]);
  EXPECT_EQ(streamed["cached_tokens"], cached_after_the_same(p2));
  EXPECT_EQ(result["turn2"]["text"], result["turn2_streamed"]["text"]);
  const auto& twice = result["completion"];
  const int64_t p = twice[0]["usage"]["prompt_tokens"];
  ASSERT_GT(p, 16);
  EXPECT_EQ(twice[0]["usage"]["cached_tokens"], 0);
  EXPECT_EQ(twice[1]["usage"]["cached_tokens"], cached_after_the_same(p));
  EXPECT_EQ(twice[1]["text"], twice[0]["text"]);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST_F(e2e_openai_python, whole_and_streamed) {
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  const auto result = run_openai_client(server, "completions");
  EXPECT_EQ(result["version"], "3.57.0") << "tools/requirements-tests.txt pins this version";
  EXPECT_EQ(result["whole"]["text"], expected_once_upon_a_time());
  EXPECT_EQ(result["whole"]["finish_reason"], "length");
  EXPECT_EQ(result["whole"]["model"], "stories260K");
  EXPECT_EQ(result["whole"]["object"], "text_completion");
  EXPECT_EQ(result["whole"]["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(result["whole"]["usage"]["completion_tokens"], 60);
  EXPECT_EQ(result["whole"]["usage"]["total_tokens"], 65);
  // The client's own typed field; 0: the server's first completion finds nothing cached.
  EXPECT_EQ(result["whole"]["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(result["stream"]["text"], expected_once_upon_a_time());
  EXPECT_EQ(result["stream"]["finish_reason"], "length");
  // One event per token and the closing one with the finish reason.
  EXPECT_EQ(result["stream"]["chunks"], 61);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST_F(e2e_openai_python, stream_pacing_changes_the_writes_not_the_stream) {
  // Every step's events written as they come, and up to eight events to a write for up to a
  // second (the test above runs the default pacing): the client still reads the same 61
  // events and the same text.
  for (const std::vector<std::string>& pacing :
       {std::vector<std::string>{"--set", "server.stream_delay_ms=0"},
        std::vector<std::string>{"--set", "server.stream_interval=8", "--set",
                                 "server.stream_delay_ms=1000"}}) {
    SCOPED_TRACE(pacing.at(1));
    conveyor_process server{pacing};
    ASSERT_TRUE(server.ok()) << server.error();
    const auto result = run_openai_client(server, "completions");
    EXPECT_EQ(result["whole"]["text"], expected_once_upon_a_time());
    EXPECT_EQ(result["stream"]["text"], expected_once_upon_a_time());
    EXPECT_EQ(result["stream"]["finish_reason"], "length");
    EXPECT_EQ(result["stream"]["chunks"], 61);
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
}

TEST_F(e2e_openai_python, invalid_requests_raise_bad_request_and_not_found) {
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  const auto result = run_openai_client(server, "bad-requests");
  EXPECT_EQ(result["temperature"],
            raised("BadRequestError", 400, "invalid_request_error", "temperature", "bad_request",
                   "'temperature' must be between 0 and 2, got 5.5"));
  EXPECT_EQ(result["max_tokens_type"],
            raised("BadRequestError", 400, "invalid_request_error", "max_tokens", "bad_request",
                   "'max_tokens' must be an integer, got string"));
  EXPECT_EQ(result["prompt_too_long"],
            raised("BadRequestError", 400, "invalid_request_error", nullptr, "prompt_too_long",
                   "the prompt has 5 tokens and max_tokens is 600: together 605, more than the "
                   "context of 512 tokens"));
  EXPECT_EQ(result["unknown_endpoint"],
            raised("NotFoundError", 404, "invalid_request_error", nullptr, "not_found",
                   "no such endpoint: /v1/models/no-such-model"));
  EXPECT_EQ(result["unknown_model"],
            raised("NotFoundError", 404, "invalid_request_error", "model", "model_not_found",
                   "The model `gpt-4` does not exist"));
  EXPECT_EQ(result["unknown_chat_model"],
            raised("NotFoundError", 404, "invalid_request_error", "model", "model_not_found",
                   "The model `gpt-4` does not exist"));
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST_F(e2e_openai_python, deadline_raises_504_and_full_queue_raises_rate_limit) {
  // One slot and a queue of one; the script fills both itself before each refusal.
  conveyor_process server{one_slot_args()};
  ASSERT_TRUE(server.ok()) << server.error();
  const auto result = run_openai_client(server, "busy");
  EXPECT_EQ(result["expired"], raised("InternalServerError", 504, "timeout_error", nullptr,
                                      "expired", "deadline passed while waiting in the queue"));
  EXPECT_EQ(result["queue_full"],
            raised("RateLimitError", 429, "rate_limit_error", nullptr, "rejected_queue_full",
                   "queue full: 1 requests waiting (max 1)"));
  // The script's slot holder was cancelled when it closed its stream (the counters hear of it
  // in their own time: wait for it).
  std::string metrics = server.metrics();
  for (auto t0 = std::chrono::steady_clock::now();
       metric_value(metrics, "conveyor_requests_total{outcome=\"cancelled\"}") != 1;
       metrics = server.metrics())
    ASSERT_LT(std::chrono::steady_clock::now() - t0, 30s) << metrics;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace conveyor::e2e
