// Every error the real server gives a client, with its real status, headers and body.
#include <gtest/gtest.h>

#include <csignal>

#include "tests/e2e/conveyor_process.hpp"

namespace conveyor::e2e {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// The OpenAI-shaped error body.
json error_body(const std::string& message, const std::string& type, const json& param,
                const std::string& code) {
  return json{{"error", {{"message", message}, {"type", type}, {"param", param}, {"code", code}}}};
}

TEST(e2e_errors, bad_requests_get_400_404_405) {
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();

  auto malformed = server.request("POST", "/v1/completions", R"({"prompt": "Hi",)");
  ASSERT_TRUE(malformed);
  EXPECT_EQ(malformed->status, 400u);
  EXPECT_EQ(malformed->header("content-type"), "application/json");
  EXPECT_EQ(malformed->json(),
            error_body("the body is not valid JSON: parse error at line 1, column 17: syntax error "
                       "while parsing object key - unexpected end of input; expected string "
                       "literal",
                       "invalid_request_error", nullptr, "bad_request"));

  auto wrong_type =
      server.request("POST", "/v1/completions", R"({"prompt": "Hi", "max_tokens": "ten"})");
  ASSERT_TRUE(wrong_type);
  EXPECT_EQ(wrong_type->status, 400u);
  EXPECT_EQ(wrong_type->json(), error_body("'max_tokens' must be an integer, got string",
                                           "invalid_request_error", "max_tokens", "bad_request"));

  // stories260K's context is 512 tokens; the prompt has 5.
  auto too_long = server.request("POST", "/v1/completions",
                                 R"({"prompt": "Once upon a time", "max_tokens": 600})");
  ASSERT_TRUE(too_long);
  EXPECT_EQ(too_long->status, 400u);
  EXPECT_EQ(too_long->json(),
            error_body("the prompt has 5 tokens and max_tokens is 600: together 605, more than "
                       "the context of 512 tokens",
                       "invalid_request_error", nullptr, "prompt_too_long"));

  auto unknown = server.request("GET", "/v2/completions");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404u);
  EXPECT_EQ(unknown->json(), error_body("no such endpoint: /v2/completions",
                                        "invalid_request_error", nullptr, "not_found"));

  auto wrong_method = server.request("GET", "/v1/completions");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405u);
  EXPECT_EQ(wrong_method->header("allow"), "POST");
  EXPECT_EQ(wrong_method->json(),
            error_body("method GET is not allowed on /v1/completions", "invalid_request_error",
                       nullptr, "method_not_allowed"));

  // A model the server does not serve: OpenAI's 404; leaving the model out stays allowed.
  auto other_model = server.request("POST", "/v1/completions",
                                    R"({"model": "gpt-4", "prompt": "Hi", "max_tokens": 2})");
  ASSERT_TRUE(other_model);
  EXPECT_EQ(other_model->status, 404u);
  EXPECT_EQ(other_model->json(), error_body("The model `gpt-4` does not exist",
                                            "invalid_request_error", "model", "model_not_found"));

  // A timeout whose nanoseconds overflow the deadline is refused, not expired at once.
  auto huge_timeout = server.request("POST", "/v1/completions",
                                     R"({"prompt": "Hi", "max_tokens": 2, "timeout": 1e10})");
  ASSERT_TRUE(huge_timeout);
  EXPECT_EQ(huge_timeout->status, 400u);
  EXPECT_EQ(huge_timeout->json(),
            error_body("'timeout' must be at most 31536000 seconds (a year), got 10000000000.0",
                       "invalid_request_error", "timeout", "bad_request"));

  // The server still works after all that.
  auto fine = server.request("POST", "/v1/completions",
                             R"({"prompt": "Once upon a time", "max_tokens": 60,
                                 "temperature": 0})");
  ASSERT_TRUE(fine);
  EXPECT_EQ(fine->json()["choices"][0]["text"], expected_once_upon_a_time());
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(e2e_errors, body_over_the_limit_gets_413) {
  conveyor_process server{{"--set", "server.max_body_bytes=1024"}};
  ASSERT_TRUE(server.ok()) << server.error();
  const auto body = json{{"prompt", std::string(2000, 'a')}, {"max_tokens", 1}}.dump();
  test_client client{server.port()};
  ASSERT_TRUE(client.send_request("POST", "/v1/completions", body));
  auto reply = client.read_response();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 413u);
  EXPECT_EQ(reply->header("connection"), "close");
  EXPECT_EQ(reply->json(), error_body("the request body exceeds 1024 bytes",
                                      "invalid_request_error", nullptr, "body_too_large"));
  EXPECT_TRUE(client.wait_closed()) << "the server keeps a connection with an unread body open";
  // A body under the limit is fine.
  auto small = server.request("POST", "/v1/completions",
                              R"({"prompt": "Once upon a time", "max_tokens": 60,
                                  "temperature": 0})");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->status, 200u);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(e2e_errors, full_queue_gets_429_with_retry_after) {
  conveyor_process server{one_slot_args()};
  ASSERT_TRUE(server.ok()) << server.error();
  // The slot runs the first request, the second waits in the queue of one.
  auto running = open_stream(server.port(), stream_body(480));
  ASSERT_TRUE(running);
  test_client waiting{server.port()};
  ASSERT_TRUE(waiting.send_request("POST", "/v1/completions", stream_body(480)));
  for (auto t0 = std::chrono::steady_clock::now();
       metric_value(server.metrics(), "conveyor_queue_depth") != 1;)
    ASSERT_LT(std::chrono::steady_clock::now() - t0, 10s) << server.metrics();

  auto refused = server.request("POST", "/v1/completions",
                                R"({"prompt": "Once upon a time", "max_tokens": 4})");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 429u);
  EXPECT_EQ(refused->header("retry-after"), "1");
  EXPECT_EQ(refused->json(), error_body("queue full: 1 requests waiting (max 1)",
                                        "rate_limit_error", nullptr, "rejected_queue_full"));
  EXPECT_FALSE(waiting.read_until("HTTP/1.1", 100ms)) << "the waiting request answered early";
  // When the running request's client leaves, the waiting one gets the slot.
  running->close();
  EXPECT_TRUE(waiting.read_until("data: ", 10s)) << waiting.raw();
  EXPECT_EQ(waiting.raw().rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << waiting.raw();
  waiting.close();
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(e2e_errors, deadline_in_the_queue_gets_504) {
  conveyor_process server{one_slot_args()};
  ASSERT_TRUE(server.ok()) << server.error();
  auto running = open_stream(server.port(), stream_body(480));
  ASSERT_TRUE(running);
  auto expired = server.request("POST", "/v1/completions",
                                R"({"prompt": "Once upon a time", "max_tokens": 4,
                                    "timeout": 0.001})");
  ASSERT_TRUE(expired);
  // The deadline was kept: the request expired while the slot was still busy, not when it
  // became free (nothing has finished yet).
  const auto metrics = server.metrics();
  EXPECT_EQ(metric_value(metrics, R"(conveyor_requests_total{outcome="finished"})"), 0)
      << metrics;
  EXPECT_EQ(expired->status, 504u);
  EXPECT_EQ(expired->json(), error_body("deadline passed while waiting in the queue",
                                        "timeout_error", nullptr, "expired"));
  running->close();
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(e2e_errors, draining_server_refuses_new_requests_and_finishes_running_ones) {
  // A drain long enough for the running request even on a loaded machine.
  conveyor_process server{one_slot_args({"--set", "server.drain_timeout_s=60"})};
  ASSERT_TRUE(server.ok()) << server.error();
  // Seconds of work for the one slot: the drain lasts while the few requests below are answered.
  constexpr int tokens = 300;
  auto running = open_stream(server.port(), stream_body(tokens));
  ASSERT_TRUE(running);
  // A connection open before the drain, with no request in progress, stays open (idle) during
  // it. (One that had just had a response could still be finishing that response on the
  // server's side when the drain begins, and would rightly close after it.)
  test_client kept{server.port()};
  ASSERT_TRUE(kept.connected());
  // The server has accepted it: it accepts connections in order, and a later one is answered.
  auto before = server.request("GET", "/health");
  ASSERT_TRUE(before);
  ASSERT_EQ(before->status, 200u);
  server.signal(SIGTERM);
  // Wait until the drain began: /health answers 503 or nothing listens any more.
  for (auto t0 = std::chrono::steady_clock::now();;) {
    auto health = server.request("GET", "/health", "", 2s);
    if (!health || health->status == 503) break;
    ASSERT_EQ(health->status, 200u);
    ASSERT_LT(std::chrono::steady_clock::now() - t0, 30s) << "SIGTERM did not start a drain";
  }
  // A request on the open connection gets 503 shutting_down.
  auto refused =
      kept.request("POST", "/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 4})");
  ASSERT_TRUE(refused) << "the idle connection was closed by the drain\n" << server.log();
  EXPECT_EQ(refused->status, 503u) << refused->body;
  EXPECT_EQ(refused->header("retry-after"), "1");
  EXPECT_EQ(refused->json(), error_body("the server is shutting down and takes no new requests",
                                        "server_error", nullptr, "shutting_down"));
  // A new connection is refused (the listening socket is closed), or its request gets 503.
  test_client late{server.port()};
  if (late.connected()) {
    auto reply = late.request("POST", "/v1/completions",
                              R"({"prompt": "Once upon a time", "max_tokens": 4})");
    if (reply) {
      EXPECT_EQ(reply->status, 503u) << reply->body;
      EXPECT_EQ(reply->header("retry-after"), "1");
      EXPECT_EQ(reply->json()["error"]["code"], "shutting_down");
      EXPECT_EQ(reply->json()["error"]["type"], "server_error");
    }
  }
  // The running request still finishes, whole.
  auto reply = running->read_response(120s);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200u);
  const auto events = sse_events(reply->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(events[events.size() - 2]["usage"]["completion_tokens"], tokens);
  EXPECT_EQ(events[events.size() - 3]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(server.wait(120s), 0) << server.log();
}

}  // namespace
}  // namespace conveyor::e2e
