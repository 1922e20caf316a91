// The HTTP server end to end over real sockets on 127.0.0.1, with a fake backend: completions
// plain and streamed, prompt arrays, concurrency, keep-alive, errors, disconnects and drain.
#include "server/http_server.hpp"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "fake_backend.hpp"
#include "test_client.hpp"

namespace conveyor::server::test {

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::string completion(const json& prompt, int max_tokens, bool stream = false) {
  return json{
      {"model", "fake-model"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"stream", stream}}
      .dump();
}

// The text of each choice of a streamed body, by index, and its finish reasons.
struct stream_result {
  std::map<int, std::string> text;
  std::map<int, std::string> finish;
  std::string id;
  bool done = false;
  int chunks = 0;
  json error;
};

stream_result collect(const std::string& body) {
  stream_result r;
  for (const auto& ev : sse_events(body)) {
    EXPECT_FALSE(r.done) << "event after [DONE]";
    if (ev == "[DONE]") {
      r.done = true;
      continue;
    }
    if (ev.contains("error")) {
      r.error = ev["error"];
      continue;
    }
    EXPECT_EQ(ev["object"], "text_completion");
    EXPECT_EQ(ev["model"], "fake-model");
    if (r.id.empty()) r.id = ev["id"];
    EXPECT_EQ(ev["id"], r.id);
    ++r.chunks;
    for (const auto& c : ev["choices"]) {
      int index = c["index"];
      EXPECT_TRUE(c["logprobs"].is_null());
      r.text[index] += c["text"].get<std::string>();
      if (!c["finish_reason"].is_null()) {
        EXPECT_EQ(r.finish.count(index), 0u) << "two finish chunks for " << index;
        r.finish[index] = c["finish_reason"];
      }
    }
  }
  return r;
}

void expect_error(const std::optional<http_reply>& reply, unsigned status, const std::string& type,
                  const json& param) {
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, status) << reply->body;
  EXPECT_EQ(reply->header("content-type"), "application/json");
  auto j = reply->json();
  ASSERT_TRUE(j.contains("error")) << reply->body;
  EXPECT_EQ(j["error"]["type"], type) << reply->body;
  EXPECT_EQ(j["error"]["param"], param) << reply->body;
  EXPECT_TRUE(j["error"]["message"].is_string());
  EXPECT_TRUE(j["error"].contains("code"));
}

class http_server_test : public ::testing::Test {
 protected:
  void start(server_options opts = {}, bool ready = true) {
    opts.host = "127.0.0.1";
    opts.port = 0;
    server = std::make_unique<http_server>(opts, backend);
    ASSERT_FALSE(server->start());
    server->set_ready(ready);
    port = server->port();
    ASSERT_NE(port, 0);
  }

  // A server whose streams' events wait up to `delay` (16 at most), and a backend whose tokens
  // each wait for `allow_tokens`; with `hang` it generates nothing after the prompt's words
  // until cancelled.
  void start_paced(std::chrono::milliseconds delay, bool hang) {
    server_options o;
    o.stream_interval = 16;
    o.stream_delay = delay;
    start(o);
    fake_backend::settings s;
    s.paced = true;
    s.hang = hang;
    backend.configure(s);
  }

  std::optional<http_reply> post(const std::string& body) {
    test_client c{port};
    return c.request("POST", "/v1/completions", body);
  }

  // Declared before the server, so destroyed after it.
  fake_backend backend;
  std::unique_ptr<http_server> server;
  uint16_t port = 0;
};

}  // namespace

// -- completions ---------------------------------------------------------------------------------

TEST_F(http_server_test, plain_completion) {
  start();
  auto reply = post(completion("the quick brown fox jumps", 3));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200u) << reply->body;
  EXPECT_EQ(reply->header("content-type"), "application/json");
  auto j = reply->json();
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_TRUE(j["created"].is_number_integer());
  EXPECT_EQ(j["model"], "fake-model");
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0], json::parse(R"({"text": "the quick brown", "index": 0,
                                            "logprobs": null, "finish_reason": "length"})"));
  EXPECT_EQ(j["usage"], json::parse(R"({"prompt_tokens": 5, "completion_tokens": 3,
                                        "total_tokens": 8,
                                        "prompt_tokens_details": {"cached_tokens": 0}})"));

  // Ends on its own before max_tokens: "stop".
  reply = post(completion("short prompt", 10));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->json()["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(reply->json()["choices"][0]["text"], "short prompt");
}

TEST_F(http_server_test, fields_reach_the_backend_and_defaults_fill_the_rest) {
  start();
  auto reply = post(R"({"prompt": "a b", "temperature": 0, "top_p": 0.5, "top_k": 3,
                        "seed": 11, "stop": "b", "priority": 2, "timeout": 1.5, "future": 1})");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200u) << reply->body;
  auto reqs = backend.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].prompt, "a b");
  EXPECT_EQ(reqs[0].params.max_tokens, 8);  // the fake backend's default
  EXPECT_FLOAT_EQ(reqs[0].params.temperature, 0.0f);
  EXPECT_FLOAT_EQ(reqs[0].params.top_p, 0.5f);
  EXPECT_EQ(reqs[0].params.top_k, 3);
  EXPECT_EQ(reqs[0].params.seed, 11u);
  EXPECT_EQ(reqs[0].params.stop, std::vector<std::string>{"b"});
  EXPECT_EQ(reqs[0].priority, 2);
  EXPECT_DOUBLE_EQ(reqs[0].timeout_s.value_or(0), 1.5);
}

TEST_F(http_server_test, streamed_chunks_concatenate_to_the_plain_text) {
  start();
  const std::string prompt = "one two three four five six seven";
  auto plain = post(completion(prompt, 5));
  ASSERT_TRUE(plain);
  auto plain_text = plain->json()["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(plain_text, expected_text(prompt, 5));

  test_client c{port};
  auto reply = c.request("POST", "/v1/completions", completion(prompt, 5, true));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200u);
  EXPECT_EQ(reply->header("content-type"), "text/event-stream");
  EXPECT_EQ(reply->header("transfer-encoding"), "chunked");
  auto r = collect(reply->body);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.text[0], plain_text);
  EXPECT_EQ(r.finish[0], "length");
  EXPECT_EQ(r.chunks, 6);  // one per token, one with the finish reason
  EXPECT_EQ(r.id.rfind("cmpl-", 0), 0u);

  // Chunked streams keep the connection alive.
  auto again = c.request("GET", "/health");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200u);
}

TEST_F(http_server_test, stream_can_end_with_usage) {
  start();
  auto reply = post(R"({"prompt": "a b c", "max_tokens": 2, "stream": true,
                        "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(reply);
  auto events = sse_events(reply->body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  auto usage = events[events.size() - 2];
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
  EXPECT_EQ(usage["usage"]["prompt_tokens_details"], json({{"cached_tokens", 0}}));
}

TEST_F(http_server_test, usage_has_the_prompt_tokens_the_backend_read_from_its_cache) {
  start();
  fake_backend::settings s;
  s.cached_tokens = 2;
  backend.configure(s);
  const json usage = json::parse(R"({"prompt_tokens": 3, "completion_tokens": 2,
                                     "total_tokens": 5,
                                     "prompt_tokens_details": {"cached_tokens": 2}})");
  auto reply = post(completion("a b c", 2));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200u) << reply->body;
  EXPECT_EQ(reply->json()["usage"], usage);
  reply = post(R"({"prompt": "a b c", "max_tokens": 2, "stream": true,
                   "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(reply);
  auto events = sse_events(reply->body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[events.size() - 2]["usage"], usage);
  // A prompt array sums them over its prompts; with n > 1 each prompt counts once, as its
  // prompt tokens do: 2 of "a b c", 1 of "d" (at most its one token).
  reply = post(R"({"prompt": ["a b c", "d"], "n": 3, "max_tokens": 1})");
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200u) << reply->body;
  EXPECT_EQ(reply->json()["usage"], json::parse(R"({"prompt_tokens": 4, "completion_tokens": 6,
                                                    "total_tokens": 10,
                                                    "prompt_tokens_details":
                                                      {"cached_tokens": 3}})"));
}

TEST_F(http_server_test, prompt_array_gives_one_choice_per_prompt) {
  start();
  const json prompts = {"alpha beta gamma", "delta epsilon", "zeta eta theta iota"};
  auto reply = post(completion(prompts, 3));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200u) << reply->body;
  auto j = reply->json();
  ASSERT_EQ(j["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["text"], expected_text(prompts[i], 3));
  }
  EXPECT_EQ(j["choices"][1]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][2]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3 + 2 + 4);
  EXPECT_EQ(j["usage"]["completion_tokens"], 3 + 2 + 3);
  EXPECT_EQ(backend.submitted(), 3);

  // Streamed: chunks of all choices interleave, each tagged with its index.
  reply = post(completion(prompts, 3, true));
  ASSERT_TRUE(reply);
  auto r = collect(reply->body);
  EXPECT_TRUE(r.done);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r.text[i], expected_text(prompts[i], 3));
    EXPECT_EQ(r.finish.count(i), 1u);
  }
}

TEST_F(http_server_test, concurrent_clients_each_get_their_own_answer) {
  server_options opts;
  opts.io_threads = 4;
  start(opts);
  constexpr int clients = 64;
  std::vector<std::future<bool>> results;
  for (int i = 0; i < clients; ++i) {
    results.push_back(std::async(std::launch::async, [this, i] {
      std::string prompt =
          "client " + std::to_string(i) + " says hello number " + std::to_string(i * 7);
      bool stream = i % 2 == 1;
      test_client c{port};
      auto reply = c.request("POST", "/v1/completions", completion(prompt, 6, stream));
      if (!reply || reply->status != 200) return false;
      if (stream) return collect(reply->body).text[0] == expected_text(prompt, 6);
      return reply->json()["choices"][0]["text"] == expected_text(prompt, 6);
    }));
  }
  int ok = 0;
  for (auto& f : results) ok += f.get() ? 1 : 0;
  EXPECT_EQ(ok, clients);
  EXPECT_EQ(backend.submitted(), clients);
}

TEST_F(http_server_test, keep_alive_serves_several_requests_on_one_connection) {
  start();
  test_client c{port};
  for (int i = 0; i < 3; ++i) {
    auto reply = c.request("POST", "/v1/completions", completion("w" + std::to_string(i), 4));
    ASSERT_TRUE(reply) << i;
    EXPECT_EQ(reply->json()["choices"][0]["text"], "w" + std::to_string(i));
    EXPECT_EQ(reply->header("connection"), "");
    reply = c.request("GET", "/v1/models");
    ASSERT_TRUE(reply) << i;
    EXPECT_EQ(reply->status, 200u);
    reply = c.request("POST", "/v1/completions", completion("s", 1, true));
    ASSERT_TRUE(reply) << i;
    EXPECT_TRUE(collect(reply->body).done);
  }
  // An error answer keeps the connection too.
  expect_error(c.request("POST", "/v1/completions", R"({"prompt": 1})"), 400,
               "invalid_request_error", "prompt");
  auto reply = c.request("GET", "/health");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200u);
}

TEST_F(http_server_test, pipelined_requests_are_answered_in_order) {
  start();
  test_client c{port};
  std::string two;
  for (auto word : {"first", "second"}) {
    auto body = completion(word, 2);
    two += "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  ASSERT_TRUE(c.send(two));
  auto a = c.read_response();
  auto b = c.read_response();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->json()["choices"][0]["text"], "first");
  EXPECT_EQ(b->json()["choices"][0]["text"], "second");
}

TEST_F(http_server_test, http10_streams_are_close_delimited) {
  start();
  test_client c{port};
  ASSERT_TRUE(c.send_request("POST", "/v1/completions", completion("x y z", 3, true), {}, 10));
  auto reply = c.read_response();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->header("transfer-encoding"), "");
  EXPECT_EQ(reply->header("connection"), "close");
  auto r = collect(reply->body);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.text[0], "x y z");
}

TEST_F(http_server_test, expect_100_continue_gets_an_interim_answer) {
  start();
  test_client c{port};
  auto body = completion("go on", 2);
  ASSERT_TRUE(
      c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
             "Content-Length: " +
             std::to_string(body.size()) + "\r\n\r\n"));
  ASSERT_TRUE(c.read_until("HTTP/1.1 100 Continue\r\n\r\n", 2s));
  ASSERT_TRUE(c.send(body));
  auto reply = c.read_response();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 100u);
  reply = c.read_response();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->json()["choices"][0]["text"], "go on");
}

// -- other endpoints -----------------------------------------------------------------------------

TEST_F(http_server_test, models_lists_the_one_model) {
  start();
  test_client c{port};
  auto reply = c.request("GET", "/v1/models");
  ASSERT_TRUE(reply);
  auto j = reply->json();
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "fake-model");
  EXPECT_EQ(j["data"][0]["object"], "model");
}

TEST_F(http_server_test, health_is_503_until_ready) {
  start({}, false);
  test_client c{port};
  auto reply = c.request("GET", "/health");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 503u);
  EXPECT_EQ(reply->json()["status"], "loading");
  server->set_ready(true);
  reply = c.request("GET", "/health?verbose=1");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200u);
  EXPECT_EQ(reply->json(), json::parse(R"({"status": "ok"})"));
}

TEST_F(http_server_test, metrics_are_prometheus_text) {
  start();
  ASSERT_TRUE(post(completion("a", 1)));
  test_client c{port};
  auto reply = c.request("GET", "/metrics");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200u);
  EXPECT_EQ(reply->header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(reply->body.find("fake_requests_total 7\n"), std::string::npos) << reply->body;
  EXPECT_NE(reply->body.find("conveyor_http_responses_total{code=\"200\"} 1\n"), std::string::npos)
      << reply->body;
  EXPECT_NE(reply->body.find("conveyor_http_connections "), std::string::npos);
}

// -- errors --------------------------------------------------------------------------------------

TEST_F(http_server_test, invalid_bodies_are_400_with_param) {
  start();
  expect_error(post("{not json"), 400, "invalid_request_error", nullptr);
  expect_error(post(R"({"prompt": "p", "max_tokens": "ten"})"), 400, "invalid_request_error",
               "max_tokens");
  expect_error(post(R"({"prompt": "p", "max_tokens": 0})"), 400, "invalid_request_error",
               "max_tokens");
  expect_error(post(R"({"prompt": "p", "temperature": 2.5})"), 400, "invalid_request_error",
               "temperature");
  expect_error(post(R"({"prompt": "p", "temperature": -1})"), 400, "invalid_request_error",
               "temperature");
  expect_error(post(R"({"prompt": "p", "top_p": 0})"), 400, "invalid_request_error", "top_p");
  expect_error(post(R"({"prompt": "p", "top_k": -2})"), 400, "invalid_request_error", "top_k");
  expect_error(post(R"({"prompt": []})"), 400, "invalid_request_error", "prompt");
  expect_error(post(R"({"max_tokens": 3})"), 400, "invalid_request_error", "prompt");
  auto reply = post(R"({"prompt": "p", "top_p": 7})");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->json()["error"]["code"], "bad_request");
  EXPECT_EQ(backend.submitted(), 0);
}

TEST_F(http_server_test, backend_errors_map_to_their_status) {
  start();
  struct expectation {
    ec code;
    unsigned status;
    const char* type;
  };
  const expectation cases[] = {
      {ec::bad_request, 400, "invalid_request_error"},
      {ec::prompt_too_long, 400, "invalid_request_error"},
      {ec::rejected_queue_full, 429, "rate_limit_error"},
      {ec::shutting_down, 503, "server_error"},
      {ec::expired, 504, "timeout_error"},
      {ec::executor_lost, 500, "server_error"},
      {ec::internal, 500, "server_error"},
  };
  for (const auto& c : cases) {
    fake_backend::settings s;
    s.fail_at_submit = c.code;
    backend.configure(s);
    // Streamed requests that fail before any text get the same HTTP error.
    for (bool stream : {false, true}) {
      auto reply = post(completion("a b", 2, stream));
      expect_error(reply, c.status, c.type, nullptr);
      ASSERT_TRUE(reply);
      EXPECT_EQ(reply->json()["error"]["code"], to_string(c.code));
      EXPECT_EQ(reply->json()["error"]["message"],
                std::string{"fake failure: "} + to_string(c.code));
      EXPECT_EQ(reply->header("retry-after"), c.status == 429 || c.status == 503 ? "1" : "");
    }
  }
}

TEST_F(http_server_test, an_error_mid_stream_ends_the_stream_with_an_error_event) {
  start();
  fake_backend::settings s;
  s.fail_after_tokens = 2;
  s.fail_code = ec::executor_lost;
  backend.configure(s);
  test_client c{port};
  auto reply = c.request("POST", "/v1/completions", completion("a b c d e", 5, true));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200u);
  auto r = collect(reply->body);
  EXPECT_EQ(r.text[0], "a b");
  EXPECT_FALSE(r.done);
  EXPECT_EQ(r.error["type"], "server_error");
  EXPECT_EQ(r.error["code"], "executor_lost");
  // The connection is still usable.
  auto again = c.request("GET", "/health");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200u);
}

TEST_F(http_server_test, one_failing_choice_cancels_the_others) {
  start();
  fake_backend::settings s;
  s.hang = true;
  s.token_delay = 20ms;
  s.fail_prompt = "boom";
  s.fail_code = ec::prompt_too_long;
  backend.configure(s);
  auto reply = post(completion(json{"a b", "boom", "c"}, 3));
  expect_error(reply, 400, "invalid_request_error", nullptr);
  EXPECT_EQ(reply->json()["error"]["code"], "prompt_too_long");
  EXPECT_TRUE(fake_backend::eventually([&] { return backend.cancelled() == 2; }));
}

TEST_F(http_server_test, unknown_paths_are_404_and_wrong_methods_405) {
  start();
  test_client c{port};
  expect_error(c.request("GET", "/v2/nothing"), 404, "invalid_request_error", nullptr);
  auto reply = c.request("GET", "/v1/completions");
  expect_error(reply, 405, "invalid_request_error", nullptr);
  EXPECT_EQ(reply->header("allow"), "POST");
  reply = c.request("POST", "/health", "{}");
  expect_error(reply, 405, "invalid_request_error", nullptr);
  EXPECT_EQ(reply->header("allow"), "GET");
  reply = c.request("DELETE", "/v1/models");
  expect_error(reply, 405, "invalid_request_error", nullptr);
}

TEST_F(http_server_test, bodies_over_the_limit_are_413) {
  server_options opts;
  opts.max_body_bytes = 1024;
  start(opts);
  auto reply = post(completion(std::string(4096, 'a'), 1));
  expect_error(reply, 413, "invalid_request_error", nullptr);
  EXPECT_EQ(reply->json()["error"]["code"], "body_too_large");
  EXPECT_EQ(reply->header("connection"), "close");
  EXPECT_EQ(backend.submitted(), 0);
  // Just below the limit is fine.
  reply = post(completion(std::string(900, 'a'), 1));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200u);
}

TEST_F(http_server_test, headers_over_the_limit_are_431) {
  server_options opts;
  opts.max_header_bytes = 1024;
  start(opts);
  test_client c{port};
  auto reply = c.request("GET", "/health", "", {{"X-Big", std::string(4096, 'b')}});
  expect_error(reply, 431, "invalid_request_error", nullptr);
  EXPECT_EQ(reply->json()["error"]["code"], "headers_too_large");
}

TEST_F(http_server_test, malformed_http_is_400) {
  start();
  test_client c{port};
  ASSERT_TRUE(c.send("GARBAGE\r\n\r\n"));
  auto reply = c.read_response();
  expect_error(reply, 400, "invalid_request_error", nullptr);
  EXPECT_TRUE(c.wait_closed());
}

TEST_F(http_server_test, connections_beyond_the_limit_get_503) {
  server_options opts;
  opts.max_connections = 2;
  start(opts);
  test_client a{port}, b{port};
  ASSERT_TRUE(a.request("GET", "/health"));
  ASSERT_TRUE(b.request("GET", "/health"));
  test_client c{port};
  auto reply = c.read_response();
  expect_error(reply, 503, "server_error", nullptr);
  EXPECT_EQ(reply->json()["error"]["code"], "too_many_connections");
  EXPECT_TRUE(c.wait_closed());
  c.close();
  a.close();
  ASSERT_TRUE(fake_backend::eventually([&] {
    test_client d{port};
    auto r = d.request("GET", "/health");
    return r && r->status == 200;
  }));
}

TEST_F(http_server_test, idle_connections_are_closed) {
  server_options opts;
  opts.idle_timeout = 200ms;
  start(opts);
  test_client c{port};
  ASSERT_TRUE(c.request("GET", "/health"));
  // Closed by the server, well before the default idle timeout (60 s) could close it.
  EXPECT_TRUE(c.wait_closed(30s));
}

// -- disconnects and slow clients ----------------------------------------------------------------

TEST_F(http_server_test, disconnect_mid_stream_cancels_the_request) {
  start();
  fake_backend::settings s;
  s.hang = true;
  backend.configure(s);
  test_client c{port};
  ASSERT_TRUE(c.send_request("POST", "/v1/completions", completion("a b c", 10, true)));
  ASSERT_TRUE(c.read_until("data: "));
  c.close();
  EXPECT_TRUE(fake_backend::eventually([&] { return backend.cancelled() == 1; }));
  // The server is fine afterwards.
  backend.configure({});
  auto reply = post(completion("still here", 2));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->json()["choices"][0]["text"], "still here");
}

TEST_F(http_server_test, disconnect_while_waiting_for_a_plain_answer_cancels) {
  start();
  fake_backend::settings s;
  s.hang = true;
  backend.configure(s);
  {
    test_client c{port};
    ASSERT_TRUE(c.send_request("POST", "/v1/completions", completion(json{"a", "b", "c"}, 3)));
    ASSERT_TRUE(fake_backend::eventually([&] { return backend.submitted() == 3; }));
  }
  EXPECT_TRUE(fake_backend::eventually([&] { return backend.cancelled() == 3; }));
}

TEST_F(http_server_test, a_client_that_does_not_read_is_cut_off) {
  server_options opts;
  opts.max_stream_buffer_bytes = 64 * 1024;
  start(opts);
  fake_backend::settings s;
  s.token_delay = 0ms;
  s.repeat = true;
  backend.configure(s);
  test_client c{port, 4096};
  std::string word(2000, 'w');
  ASSERT_TRUE(c.send_request("POST", "/v1/completions", completion(word, 1000000, true)));
  EXPECT_TRUE(fake_backend::eventually([&] { return backend.cancelled() == 1; }, 20s));
  EXPECT_EQ(backend.finished(), 0);
}

// -- drain and stop ------------------------------------------------------------------------------

TEST_F(http_server_test, drain_lets_a_running_request_finish_then_stops) {
  start();
  fake_backend::settings s;
  s.paced = true;  // the running request streams only the tokens the test allows
  backend.configure(s);
  test_client idle_a{port}, idle_b{port};
  ASSERT_TRUE(idle_a.request("GET", "/health"));
  ASSERT_TRUE(idle_b.request("GET", "/health"));

  test_client running{port};
  const std::string prompt = "one two three four five six seven eight";
  ASSERT_TRUE(running.send_request("POST", "/v1/completions", completion(prompt, 8, true)));
  backend.allow_tokens(1);
  ASSERT_TRUE(running.read_until("data: "));
  server->begin_drain();

  // New work is refused on open connections, health says draining, and they then close.
  auto health = idle_a.request("GET", "/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503u);
  EXPECT_EQ(health->json()["status"], "draining");
  EXPECT_EQ(health->header("connection"), "close");
  auto refused = idle_b.request("POST", "/v1/completions", completion("x", 1));
  expect_error(refused, 503, "server_error", nullptr);
  EXPECT_EQ(refused->json()["error"]["code"], "shutting_down");
  EXPECT_EQ(refused->header("retry-after"), "1");
  // No new connections.
  EXPECT_TRUE(fake_backend::eventually([&] {
    test_client late{port};
    return !late.connected() || !late.request("GET", "/health");
  }));

  // The running stream finishes completely.
  backend.allow_tokens(7);
  auto reply = running.read_response();
  ASSERT_TRUE(reply);
  auto r = collect(reply->body);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.text[0], prompt);
  EXPECT_EQ(backend.cancelled(), 0);

  auto waiter = std::async(std::launch::async, [this] { server->wait(); });
  EXPECT_EQ(waiter.wait_for(5s), std::future_status::ready);
}

TEST_F(http_server_test, drain_timeout_cancels_what_still_runs) {
  server_options opts;
  opts.drain_timeout = 200ms;
  start(opts);
  fake_backend::settings s;
  s.hang = true;
  backend.configure(s);
  test_client streamed{port}, plain{port};
  ASSERT_TRUE(streamed.send_request("POST", "/v1/completions", completion("a b", 5, true)));
  ASSERT_TRUE(plain.send_request("POST", "/v1/completions", completion("c d", 5)));
  ASSERT_TRUE(streamed.read_until("data: "));
  ASSERT_TRUE(fake_backend::eventually([&] { return backend.submitted() == 2; }));
  server->begin_drain();
  // The requests hang until cancelled: only the drain timeout can end the drain.
  auto waiter = std::async(std::launch::async, [this] { server->wait(); });
  const bool drained = waiter.wait_for(30s) == std::future_status::ready;
  if (!drained) server->stop();
  ASSERT_TRUE(drained) << "the drain timeout did not end the drain";
  EXPECT_EQ(backend.cancelled(), 2);

  auto reply = streamed.read_response();
  ASSERT_TRUE(reply);
  auto r = collect(reply->body);
  EXPECT_EQ(r.text[0], "a b");
  EXPECT_FALSE(r.done);
  EXPECT_EQ(r.error["code"], "shutting_down");
  expect_error(plain.read_response(), 503, "server_error", nullptr);
}

TEST_F(http_server_test, drain_with_nothing_running_stops_at_once) {
  start();
  test_client c{port};
  ASSERT_TRUE(c.request("GET", "/health"));
  server->begin_drain();
  auto waiter = std::async(std::launch::async, [this] { server->wait(); });
  EXPECT_EQ(waiter.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(c.wait_closed());
}

TEST_F(http_server_test, stop_cancels_running_requests) {
  start();
  fake_backend::settings s;
  s.hang = true;
  backend.configure(s);
  test_client c{port};
  ASSERT_TRUE(c.send_request("POST", "/v1/completions", completion("a", 3)));
  ASSERT_TRUE(fake_backend::eventually([&] { return backend.submitted() == 1; }));
  server->stop();
  EXPECT_EQ(backend.cancelled(), 1);
  expect_error(c.read_response(), 503, "server_error", nullptr);
  server->wait();  // returns at once
}

TEST_F(http_server_test, late_events_after_the_server_is_gone_are_dropped) {
  start();
  fake_backend::settings s;
  s.hold = true;
  backend.configure(s);
  test_client c{port};
  ASSERT_TRUE(c.send_request("POST", "/v1/completions", completion("a", 3, true)));
  ASSERT_TRUE(fake_backend::eventually([&] { return backend.submitted() == 1; }));
  server.reset();
  // The client's connection went with the server, and the held events, released now, must not
  // touch the destroyed server (under ASan a use after free fails this test).
  EXPECT_TRUE(c.wait_closed());
  backend.release_held();
  EXPECT_TRUE(c.raw().find("data: ") == std::string::npos) << c.raw();
}

TEST_F(http_server_test, late_events_after_the_client_is_gone_are_dropped) {
  start();
  fake_backend::settings s;
  s.hold = true;
  backend.configure(s);
  {
    test_client c{port};
    ASSERT_TRUE(c.send_request("POST", "/v1/completions", completion("a", 3, true)));
    ASSERT_TRUE(fake_backend::eventually([&] { return backend.submitted() == 1; }));
  }
  ASSERT_TRUE(fake_backend::eventually([&] { return backend.cancelled() == 1; }));
  backend.release_held();
  backend.configure({});
  auto reply = post(completion("fine", 1));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200u);
}

TEST_F(http_server_test, start_fails_cleanly_on_a_busy_port) {
  start();
  server_options opts;
  opts.host = "127.0.0.1";
  opts.port = port;
  http_server second{opts, backend};
  auto err = second.start();
  EXPECT_TRUE(err);
  second.wait();  // never started: returns at once
}

// -- curl ----------------------------------------------------------------------------------------

TEST_F(http_server_test, curl_plain_and_streamed) {
  start();
  auto url = "http://127.0.0.1:" + std::to_string(port) + "/v1/completions";
  auto plain = run_command("curl -s --max-time 10 " + url +
                           " -H 'Content-Type: application/json'"
                           " -d '{\"prompt\": \"hello from curl today\", \"max_tokens\": 3}'");
  auto j = json::parse(plain, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << plain;
  EXPECT_EQ(j["choices"][0]["text"], "hello from curl");

  auto streamed = run_command(
      "curl -s -N --max-time 10 " + url +
      " -H 'Content-Type: application/json'"
      " -d '{\"prompt\": \"hello from curl today\", \"max_tokens\": 3, \"stream\": true}'");
  auto r = collect(streamed);
  EXPECT_TRUE(r.done) << streamed;
  EXPECT_EQ(r.text[0], "hello from curl");

  auto status = run_command("curl -s -o /dev/null -w '%{http_code}' --max-time 10 " + url +
                            " -d '{\"prompt\": \"x\", \"max_tokens\": \"ten\"}'");
  EXPECT_EQ(status, "400");
}

// -- the stream interval: a stream's events gathered into fewer writes ----------------------------

// A raw chunked response (headers included): its body, and the "data: " events of each chunk.
struct chunked_body {
  std::string body;
  std::vector<int> events_per_chunk;
};

chunked_body dechunk(const std::string& raw) {
  chunked_body out;
  auto& counts = out.events_per_chunk;
  auto at = raw.find("\r\n\r\n");
  if (at == std::string::npos) return out;
  at += 4;
  while (at < raw.size()) {
    const auto line_end = raw.find("\r\n", at);
    if (line_end == std::string::npos) break;
    const auto size = std::stoul(raw.substr(at, line_end - at), nullptr, 16);
    if (size == 0) break;
    const auto chunk = raw.substr(line_end + 2, size);
    int n = 0;
    for (auto p = chunk.find("data: "); p != std::string::npos; p = chunk.find("data: ", p + 1))
      ++n;
    counts.push_back(n);
    out.body += chunk;
    at = line_end + 2 + size + 2;
  }
  return out;
}

TEST_F(http_server_test, a_stream_interval_gathers_events_into_fewer_writes) {
  // Seven tokens, each handed to the connection before the next is allowed: with interval 1
  // (or no delay) every event is its own write (one HTTP chunk); with 3 and a delay of a
  // second (far longer than the test's gaps between tokens) the first goes alone, then three
  // per write, and the end takes the finish event and [DONE].
  struct pacing {
    std::size_t interval;
    std::chrono::milliseconds delay;
  };
  for (const auto [interval, delay] :
       {pacing{1, std::chrono::milliseconds{1000}}, pacing{3, std::chrono::milliseconds{0}},
        pacing{3, std::chrono::milliseconds{1000}}}) {
    SCOPED_TRACE(std::to_string(interval) + " events, " + std::to_string(delay.count()) + " ms");
    server_options o;
    o.stream_interval = interval;
    o.stream_delay = delay;
    o.io_threads = 1;  // the ordering below relies on one I/O thread
    start(o);
    fake_backend::settings s;
    s.paced = true;
    backend.configure(s);
    const int before = backend.tokens_sent();
    test_client c{port};
    ASSERT_TRUE(
        c.send_request("POST", "/v1/completions", completion("w0 w1 w2 w3 w4 w5 w6", 7, true)));
    backend.allow_tokens(1);
    ASSERT_TRUE(c.read_until("\"w0\""));
    for (int i = 1; i < 7; ++i) {
      backend.allow_tokens(1);
      ASSERT_TRUE(
          fake_backend::eventually([&] { return backend.tokens_sent() == before + i + 1; }));
      // One I/O thread: once another connection is answered, the token's event (posted
      // before it) has run on this connection's strand.
      ASSERT_TRUE(test_client{port}.request("GET", "/health"));
    }
    ASSERT_TRUE(c.read_until("\r\n0\r\n\r\n"));
    const auto expected = interval == 1 || delay.count() == 0
                              ? std::vector<int>{1, 1, 1, 1, 1, 1, 1, 2}
                              : std::vector<int>{1, 3, 3, 2};
    const auto got = dechunk(c.raw());
    EXPECT_EQ(got.events_per_chunk, expected) << c.raw();
    const auto r = collect(got.body);
    EXPECT_EQ(r.text.at(0), "w0 w1 w2 w3 w4 w5 w6");
    EXPECT_EQ(r.finish.at(0), "length");
    EXPECT_TRUE(r.done);
    server.reset();
  }
}

TEST_F(http_server_test, a_waiting_stream_event_goes_out_at_its_deadline_without_a_next_one) {
  // The second token comes soon after the first and waits (a fast stream); the backend then
  // sends nothing more until the client has read it, so only the connection's timer can write
  // it. The delay (a second) is far longer than the gap between the two tokens.
  start_paced(std::chrono::milliseconds{1000}, false);
  test_client c{port};
  ASSERT_TRUE(c.send_request("POST", "/v1/completions", completion("w0 w1 w2", 3, true)));
  // The first token goes at once; once the client has it (so that the second cannot join the
  // first write), the second comes.
  backend.allow_tokens(1);
  ASSERT_TRUE(c.read_until("\"w0\"")) << c.raw();
  backend.allow_tokens(1);
  ASSERT_TRUE(c.read_until("\" w1\"", std::chrono::seconds{30})) << c.raw();
  EXPECT_EQ(c.raw().find("\" w2\""), std::string::npos);
  backend.allow_tokens(1);
  ASSERT_TRUE(c.read_until("\r\n0\r\n\r\n")) << c.raw();
  const auto got = dechunk(c.raw());
  const auto r = collect(got.body);
  EXPECT_EQ(r.text.at(0), "w0 w1 w2");
  EXPECT_TRUE(r.done);
}

TEST_F(http_server_test, each_choices_first_token_goes_out_at_once_while_others_wait) {
  // Two prompts, each answering one token and then generating nothing more until cancelled.
  // The second choice's token comes after the client has read the first one's, right after
  // it: with a delay of an hour, a choice's first token that waited would not come here.
  start_paced(std::chrono::hours{1}, true);
  test_client c{port};
  ASSERT_TRUE(
      c.send_request("POST", "/v1/completions", completion(json::array({"a0", "b0"}), 5, true)));
  backend.allow_tokens(1);
  ASSERT_TRUE(c.read_until("\n\n")) << c.raw();
  backend.allow_tokens(1);
  ASSERT_TRUE(c.read_until("\"a0\"")) << c.raw();
  ASSERT_TRUE(c.read_until("\"b0\"")) << c.raw();
}

// -- whole steps: a step's events posted and written together
// ---------------------------

TEST_F(http_server_test, whole_steps_stream_completely_and_in_order) {
  start();
  fake_backend::settings s;
  s.whole_steps = true;
  s.tokens_per_step = 3;
  s.repeat = true;
  s.token_delay = std::chrono::milliseconds{0};
  backend.configure(s);
  std::string prompt;
  for (int i = 0; i < 10; ++i) prompt += (i ? " w" : "w") + std::to_string(i);
  // Several streams at once over real sockets, each with 61 tokens (21 steps, the last with one
  // token and the finish).
  const int clients = 4;
  std::vector<std::optional<http_reply>> replies(clients);
  std::vector<std::thread> threads;
  for (int k = 0; k < clients; ++k)
    threads.emplace_back([&, k] {
      test_client c{port};
      replies[k] = c.request("POST", "/v1/completions",
                             R"({"prompt": ")" + prompt + R"(", "max_tokens": 61, "stream": true,
                                 "stream_options": {"include_usage": true}})");
    });
  for (auto& t : threads) t.join();
  std::string expected;
  for (int i = 0; i < 61; ++i) expected += (i ? " w" : "w") + std::to_string(i % 10);
  for (const auto& reply : replies) {
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 200u);
    auto events = sse_events(reply->body);
    // 21 text chunks in order, the finish chunk, the usage chunk, [DONE] once and last.
    ASSERT_EQ(events.size(), 24u) << reply->body;
    std::string text;
    for (std::size_t i = 0; i < 21; ++i) {
      EXPECT_TRUE(events[i]["choices"][0]["finish_reason"].is_null());
      text += events[i]["choices"][0]["text"].get<std::string>();
    }
    EXPECT_EQ(text, expected);
    EXPECT_EQ(events[21]["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(events[21]["choices"][0]["text"], "");
    EXPECT_EQ(events[22]["usage"]["completion_tokens"], 61);
    EXPECT_EQ(events[23], "[DONE]");
  }
}

TEST_F(http_server_test, whole_steps_error_mid_stream_ends_the_stream_once) {
  start();
  fake_backend::settings s;
  s.whole_steps = true;
  s.tokens_per_step = 2;
  s.fail_after_tokens = 5;
  backend.configure(s);
  auto reply = post(completion("a b c d e f g h", 8, true));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200u);
  auto r = collect(reply->body);
  // The two whole steps, then the failing step with its one token and the error event.
  EXPECT_EQ(r.text[0], "a b c d e");
  EXPECT_EQ(r.chunks, 3);
  EXPECT_EQ(r.error["code"], to_string(ec::executor_lost));
  EXPECT_FALSE(r.done);
}

TEST_F(http_server_test, whole_steps_disconnect_mid_stream_cancels_the_request) {
  start();
  fake_backend::settings s;
  s.whole_steps = true;
  s.hang = true;
  backend.configure(s);
  test_client c{port};
  ASSERT_TRUE(c.send_request("POST", "/v1/completions", completion("a b c", 10, true)));
  ASSERT_TRUE(c.read_until("data: "));
  c.close();
  EXPECT_TRUE(fake_backend::eventually([&] { return backend.cancelled() == 1; }));
}

}  // namespace conveyor::server::test
