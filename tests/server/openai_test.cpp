// Validating completion bodies and rendering OpenAI's JSON objects, without sockets.
#include "server/openai.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace conveyor::server {

namespace {

using json = nlohmann::json;

completion_body parse_ok(const std::string& body, std::size_t max_prompts = 64) {
  auto result = parse_completion_body(body, completion_defaults{}, max_prompts);
  if (auto* err = std::get_if<body_error>(&result)) {
    ADD_FAILURE() << body << ": " << err->message;
    return {};
  }
  return std::get<completion_body>(result);
}

body_error parse_error(const std::string& body, std::size_t max_prompts = 64) {
  auto result = parse_completion_body(body, completion_defaults{}, max_prompts);
  if (auto* err = std::get_if<body_error>(&result)) return *err;
  ADD_FAILURE() << body << " was accepted";
  return {};
}

}  // namespace

TEST(server_openai_parse, absent_fields_take_the_defaults) {
  completion_defaults defaults;
  defaults.max_tokens = 32;
  defaults.temperature = 0.5f;
  auto result = parse_completion_body(R"({"prompt": "hello"})", defaults, 64);
  auto& body = std::get<completion_body>(result);
  ASSERT_EQ(body.requests.size(), 1u);
  const auto& r = body.requests[0];
  EXPECT_EQ(r.prompt, "hello");
  EXPECT_EQ(r.params.max_tokens, 32);
  EXPECT_FLOAT_EQ(r.params.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.params.top_p, 1.0f);
  EXPECT_EQ(r.params.top_k, 0);
  EXPECT_FALSE(r.params.seed);
  EXPECT_TRUE(r.params.stop.empty());
  EXPECT_EQ(r.priority, 0);
  EXPECT_FALSE(r.timeout_s);
  EXPECT_FALSE(body.stream);
  EXPECT_FALSE(body.include_usage);
}

TEST(server_openai_parse, only_the_clients_fields_are_checked_against_the_limits) {
  // The defaults come from the configuration, checked against the same limits at start
  // (generation.temperature = 2.5 stops the server there). A request that leaves a field out is
  // never refused over it: the server once checked the defaulted value and blamed the client.
  completion_defaults defaults;
  defaults.temperature = 2.5f;
  defaults.top_p = 0.0f;
  auto result = parse_completion_body(R"({"prompt": "hello"})", defaults, 64);
  auto* body = std::get_if<completion_body>(&result);
  ASSERT_NE(body, nullptr) << std::get<body_error>(result).message;
  ASSERT_EQ(body->requests.size(), 1u);
  EXPECT_FLOAT_EQ(body->requests[0].params.temperature, 2.5f);
  EXPECT_FLOAT_EQ(body->requests[0].params.top_p, 0.0f);
  // The client's own values are checked.
  auto refused = parse_completion_body(R"({"prompt": "hello", "temperature": 2.5})", defaults, 64);
  auto* err = std::get_if<body_error>(&refused);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->param, "temperature");
  EXPECT_EQ(err->message, "'temperature' must be between 0 and 2, got 2.5");
  refused = parse_completion_body(R"({"prompt": "hello", "top_p": 0})", defaults, 64);
  err = std::get_if<body_error>(&refused);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->message, "'top_p' must be greater than 0 and at most 1, got 0");
}

TEST(server_openai_parse, every_field_is_carried) {
  auto body = parse_ok(R"({"model": "m", "prompt": "a b", "max_tokens": 7, "temperature": 0,
    "top_p": 0.9, "top_k": 40, "seed": 42, "stop": ["\n", "", "END"], "priority": -3,
    "timeout": 2.5, "stream": true, "stream_options": {"include_usage": true},
    "n": 1, "echo": false, "logprobs": null, "user": "ignored", "frequency_penalty": 0})");
  ASSERT_EQ(body.requests.size(), 1u);
  const auto& r = body.requests[0];
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.params.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.9f);
  EXPECT_EQ(r.params.top_k, 40);
  EXPECT_EQ(r.params.seed, 42u);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"\n", "END"}));  // empty strings dropped
  EXPECT_EQ(r.priority, -3);
  EXPECT_DOUBLE_EQ(*r.timeout_s, 2.5);
  EXPECT_TRUE(body.stream);
  EXPECT_TRUE(body.include_usage);
}

TEST(server_openai_parse, a_prompt_array_gives_one_request_per_prompt) {
  auto body = parse_ok(R"({"prompt": ["one", "two", ""], "max_tokens": 3, "stop": "x"})");
  ASSERT_EQ(body.requests.size(), 3u);
  EXPECT_EQ(body.requests[0].prompt, "one");
  EXPECT_EQ(body.requests[1].prompt, "two");
  EXPECT_EQ(body.requests[2].prompt, "");
  for (const auto& r : body.requests) {
    EXPECT_EQ(r.params.max_tokens, 3);
    EXPECT_EQ(r.params.stop, std::vector<std::string>{"x"});
  }
}

TEST(server_openai_parse, integral_floats_count_as_integers_and_negative_seeds_wrap) {
  auto body = parse_ok(R"({"prompt": "p", "max_tokens": 10.0, "seed": -1})");
  EXPECT_EQ(body.requests[0].params.max_tokens, 10);
  EXPECT_EQ(body.requests[0].params.seed, UINT64_MAX);
}

TEST(server_openai_parse, bad_bodies_name_their_field) {
  struct bad_case {
    const char* body;
    const char* param;
  };
  const bad_case cases[] = {
      {R"({"prompt": "p", "max_tokens": "ten"})", "max_tokens"},
      {R"({"prompt": "p", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "p", "max_tokens": 2.5})", "max_tokens"},
      {R"({"prompt": "p", "max_tokens": 3000000000})", "max_tokens"},
      {R"({"prompt": "p", "temperature": -0.1})", "temperature"},
      {R"({"prompt": "p", "temperature": 2.01})", "temperature"},
      {R"({"prompt": "p", "temperature": "hot"})", "temperature"},
      {R"({"prompt": "p", "top_p": 0})", "top_p"},
      {R"({"prompt": "p", "top_p": 1.5})", "top_p"},
      {R"({"prompt": "p", "top_k": -1})", "top_k"},
      {R"({"prompt": "p", "seed": "x"})", "seed"},
      {R"({"prompt": "p", "stop": 3})", "stop"},
      {R"({"prompt": "p", "stop": ["a", 1]})", "stop"},
      {R"({"prompt": "p", "stream": "yes"})", "stream"},
      {R"({"prompt": "p", "stream_options": {"include_usage": true}})", "stream_options"},
      {R"({"prompt": "p", "stream": true, "stream_options": {"include_usage": 1}})",
       "stream_options.include_usage"},
      {R"({"prompt": "p", "priority": 1.5})", "priority"},
      {R"({"prompt": "p", "timeout": 0})", "timeout"},
      {R"({"prompt": "p", "model": 5})", "model"},
      {R"({"prompt": "p", "n": 17})", "n"},
      {R"({"prompt": "p", "n": 0})", "n"},
      {R"({"prompt": "p", "n": 1.5})", "n"},
      {R"({"prompt": "p", "best_of": 3})", "best_of"},
      {R"({"prompt": "p", "echo": 1})", "echo"},
      {R"({"prompt": "p", "logprobs": 21})", "logprobs"},
      {R"({"prompt": "p", "logprobs": -1})", "logprobs"},
      {R"({"prompt": "p", "logprobs": true})", "logprobs"},
      {R"({"prompt": "p", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "p", "max_tokens": 0, "echo": false})", "max_tokens"},
      {R"({"prompt": "p", "max_tokens": 0, "echo": true, "min_tokens": 1})", "min_tokens"},
      {R"({"prompt": "p", "suffix": "end"})", "suffix"},
      {R"({})", "prompt"},
      {R"({"prompt": null})", "prompt"},
      {R"({"prompt": []})", "prompt"},
      {R"({"prompt": [1, "a"]})", "prompt[1]"},
      {R"({"prompt": 5})", "prompt"},
  };
  for (const auto& c : cases) {
    auto err = parse_error(c.body);
    EXPECT_EQ(err.param, c.param) << c.body << ": " << err.message;
    EXPECT_FALSE(err.message.empty());
  }
}

TEST(server_openai_parse, n_gives_n_choices_per_prompt_in_openai_order_with_consecutive_seeds) {
  auto body = parse_ok(R"({"prompt": ["a", "b"], "n": 3, "seed": 10, "temperature": 0.5})");
  ASSERT_EQ(body.requests.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(body.requests[i].prompt, i < 3 ? "a" : "b") << i;
    ASSERT_TRUE(body.requests[i].params.seed.has_value()) << i;
    EXPECT_EQ(*body.requests[i].params.seed, 10 + i % 3) << i;
    EXPECT_EQ(body.requests[i].params.temperature, 0.5f) << i;
  }
  // Without a seed each choice draws its own: none is fixed here.
  auto unseeded = parse_ok(R"({"prompt": "a", "n": 2})");
  ASSERT_EQ(unseeded.requests.size(), 2u);
  EXPECT_FALSE(unseeded.requests[0].params.seed.has_value());
  EXPECT_FALSE(unseeded.requests[1].params.seed.has_value());
  // The largest seed wraps around, as a 64-bit generator seed does.
  auto wrapped = parse_ok(R"({"prompt": "a", "n": 2, "seed": 18446744073709551615})");
  EXPECT_EQ(*wrapped.requests[1].params.seed, 0u);
}

TEST(server_openai_parse, n_above_the_servers_limit_is_refused_before_any_work) {
  auto refused = parse_completion_body(R"({"prompt": "a", "n": 2147483647})", completion_defaults{},
                                       64, 4);
  ASSERT_TRUE(std::holds_alternative<body_error>(refused));
  EXPECT_EQ(std::get<body_error>(refused).param, "n");
  EXPECT_EQ(std::get<body_error>(refused).message,
            "'n' must be at most 4 (server.max_n), got 2147483647");
  auto four = parse_completion_body(R"({"prompt": "a", "n": 4})", completion_defaults{}, 64, 4);
  ASSERT_TRUE(std::holds_alternative<completion_body>(four));
  EXPECT_EQ(std::get<completion_body>(four).requests.size(), 4u);
}

TEST(server_openai_parse, too_many_prompts_are_refused) {
  auto err = parse_error(R"({"prompt": ["a", "b", "c"]})", 2);
  EXPECT_EQ(err.param, "prompt");
  EXPECT_NE(err.message.find("at most 2"), std::string::npos) << err.message;
}

TEST(server_openai_parse, malformed_json_and_non_objects_have_no_param) {
  auto err = parse_error(R"({"prompt": )");
  EXPECT_EQ(err.param, "");
  EXPECT_NE(err.message.find("not valid JSON"), std::string::npos) << err.message;
  err = parse_error(R"(["prompt"])");
  EXPECT_EQ(err.param, "");
  EXPECT_NE(err.message.find("JSON object"), std::string::npos) << err.message;
}

TEST(server_openai_parse, a_number_beyond_a_double_is_refused_not_thrown) {
  // Found by fuzz/request_json_fuzz.cpp: nlohmann throws out_of_range (not parse_error) for it.
  auto err = parse_error(R"({"prompt": "x", "max_tokens": 2.9e01784})");
  EXPECT_EQ(err.param, "");
  EXPECT_EQ(err.message, "the body is not valid JSON: number overflow parsing '2.9e01784'");
}

TEST(server_openai_render, completion_object) {
  completion_meta meta{"cmpl-abc", 1700000000, "m"};
  auto j = json::parse(
      render_completion(meta, {{"hello", "length", {3, 2}}, {"bye", "stop", {4, 1, 3}}}));
  EXPECT_EQ(j["id"], "cmpl-abc");
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "m");
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0],
            json::parse(R"({"text":"hello","index":0,"logprobs":null,"finish_reason":"length"})"));
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["usage"], json::parse(R"({"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,
                                        "prompt_tokens_details":{"cached_tokens":3}})"));
}

TEST(server_openai_render, usage_always_has_the_cached_prompt_tokens) {
  // As OpenAI and vLLM: `prompt_tokens_details.cached_tokens` is there when nothing was cached.
  completion_meta meta{"chatcmpl-abc", 1700000000, "m", api_kind::chat_completions};
  auto j = json::parse(render_completion(meta, {{"hi", "stop", {4, 1}}}));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["usage"], json::parse(R"({"prompt_tokens":4,"completion_tokens":1,"total_tokens":5,
                                        "prompt_tokens_details":{"cached_tokens":0}})"));
}

TEST(server_openai_render, errors_and_models) {
  EXPECT_EQ(json::parse(render_error("bad", "invalid_request_error", "top_p", "bad_request")),
            json::parse(R"({"error":{"message":"bad","type":"invalid_request_error",
                          "param":"top_p","code":"bad_request"}})"));
  EXPECT_TRUE(json::parse(render_error("x", "server_error", "", ""))["error"]["param"].is_null());
  auto models = json::parse(render_models("m", 9));
  EXPECT_EQ(models, json::parse(R"({"object":"list","data":[{"id":"m","object":"model",
                                 "created":9,"owned_by":"conveyor"}]})"));
}

TEST(server_openai_ids, are_cmpl_and_24_hex_digits_and_differ) {
  auto a = make_completion_id();
  auto b = make_completion_id();
  EXPECT_EQ(a.size(), 29u);
  EXPECT_EQ(a.rfind("cmpl-", 0), 0u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef", 5), std::string::npos);
  EXPECT_NE(a, b);
}

}  // namespace conveyor::server
