// Several choices per prompt (`n`) over real sockets, with curl and the official `openai` Python
// package: at temperature 0 every choice is run.c's story, with a seed choice i equals the same
// request sent alone with seed + i, and the prompt counts once in the usage.
#include <gtest/gtest.h>

#include "tests/e2e/conveyor_process.hpp"

namespace conveyor::e2e {
namespace {

using nlohmann::json;

TEST(e2e_n_choices, curl_four_greedy_choices_whole_and_streamed) {
  ASSERT_EQ(run_shell("command -v curl >/dev/null").status, 0)
      << "curl is missing: run scripts/setup.sh --tests";
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  const auto url = shell_quote(server.url() + "/v1/completions");
  const std::string body =
      R"({"prompt": "Once upon a time", "max_tokens": 60, "temperature": 0, "n": 4)";
  auto whole = run_shell("curl -sS --fail-with-body " + url +
                         " -H 'Content-Type: application/json' -d " + shell_quote(body + "}"));
  ASSERT_EQ(whole.status, 0) << whole.out;
  const auto j = json::parse(whole.out, nullptr, false);
  ASSERT_EQ(j["choices"].size(), 4u) << whole.out;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["text"], expected_once_upon_a_time()) << "choice " << i;
    EXPECT_EQ(j["choices"][i]["finish_reason"], "length");
  }
  // The 5 prompt tokens count once; 4 x 60 generated.
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 240);

  auto streamed = run_shell("curl -sSN --fail-with-body " + url +
                            " -H 'Content-Type: application/json' -d " +
                            shell_quote(body + R"(, "stream": true})"));
  ASSERT_EQ(streamed.status, 0) << streamed.out;
  const auto events = sse_events(streamed.out);
  ASSERT_GE(events.size(), 5u) << streamed.out;
  EXPECT_EQ(events.back(), "[DONE]");
  std::vector<std::string> texts(4);
  for (const auto& e : events) {
    if (!e.is_object()) continue;
    for (const auto& c : e["choices"]) texts.at(c["index"].get<size_t>()) += c["text"];
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(texts[i], expected_once_upon_a_time()) << "choice " << i;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(e2e_n_choices, openai_python_greedy_seeded_chat_and_the_limit) {
  ASSERT_EQ(run_shell(shell_quote(CONVEYOR_TEST_PYTHON) + " -c 'import openai' 2>&1").status, 0)
      << "the openai Python package is missing in " CONVEYOR_TEST_PYTHON
         ": run scripts/setup.sh --tests";
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  auto run = run_shell(shell_quote(CONVEYOR_TEST_PYTHON) + " " CONVEYOR_SOURCE_DIR
                       "/tests/e2e/openai_n.py " + shell_quote(server.url() + "/v1") + " 2>&1");
  ASSERT_EQ(run.status, 0) << run.out;
  const auto r = json::parse(run.out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << run.out;

  const auto& greedy = r["greedy"];
  EXPECT_EQ(greedy["whole"]["indexes"], json({0, 1, 2, 3}));
  for (const char* mode : {"whole", "stream"}) {
    ASSERT_EQ(greedy[mode]["texts"].size(), 4u) << mode;
    for (const auto& text : greedy[mode]["texts"]) EXPECT_EQ(text, expected_once_upon_a_time());
    for (const auto& reason : greedy[mode]["finish_reasons"]) EXPECT_EQ(reason, "length");
  }
  EXPECT_EQ(greedy["whole"]["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(greedy["stream"]["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(greedy["stream"]["usage"]["completion_tokens"], 240);

  // Choice i of seed 42 is the request alone with seed 42 + i, whole and streamed.
  const auto& seeded = r["seeded"];
  ASSERT_EQ(seeded["alone"].size(), 3u);
  EXPECT_EQ(seeded["whole"]["texts"], seeded["alone"]);
  EXPECT_EQ(seeded["stream"]["texts"], seeded["alone"]);
  EXPECT_NE(seeded["alone"][0], seeded["alone"][1]) << "seeds 42 and 43 drew the same story";

  const auto& chat = r["chat"];
  EXPECT_EQ(chat["whole"]["texts"], json({chat["alone"], chat["alone"]}));
  EXPECT_EQ(chat["stream"]["texts"], json({chat["alone"], chat["alone"]}));
  EXPECT_FALSE(chat["alone"].get<std::string>().empty());

  EXPECT_EQ(r["too_many"], json({{"class", "BadRequestError"},
                                 {"status", 400},
                                 {"param", "n"},
                                 {"message", "'n' must be at most 16 (server.max_n), got 17"}}));
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace conveyor::e2e
