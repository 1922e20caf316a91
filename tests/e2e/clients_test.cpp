// Clients that nobody here wrote get the reference text: curl (whole and streamed) and the
// official `openai` npm package.
#include <gtest/gtest.h>

#include "tests/e2e/conveyor_process.hpp"

namespace conveyor::e2e {
namespace {

using nlohmann::json;

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

TEST(e2e_clients, openai_npm_package_whole_and_streamed) {
  // Missing tools fail the test: scripts/setup.sh --tests installs them.
  ASSERT_EQ(run_shell("command -v node >/dev/null").status, 0)
      << "node is missing: run scripts/setup.sh --tests";
  ASSERT_EQ(
      run_shell("test -f " CONVEYOR_SOURCE_DIR "/tools/node_modules/openai/package.json").status, 0)
      << "the openai npm package is missing in tools/node_modules: run scripts/setup.sh --tests";
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();

  auto run = run_shell("node " CONVEYOR_SOURCE_DIR "/tests/e2e/openai_client.mjs " +
                       shell_quote(server.url() + "/v1") + " 2>&1");
  ASSERT_EQ(run.status, 0) << run.out;
  const auto result = json::parse(run.out, nullptr, false);
  ASSERT_TRUE(result.is_object()) << run.out;
  EXPECT_EQ(result["whole"]["text"], expected_once_upon_a_time());
  EXPECT_EQ(result["whole"]["finish_reason"], "length");
  EXPECT_EQ(result["whole"]["model"], "stories260K");
  EXPECT_EQ(result["whole"]["usage"],
            (json{{"prompt_tokens", 5}, {"completion_tokens", 60}, {"total_tokens", 65}}));
  EXPECT_EQ(result["stream"]["text"], expected_once_upon_a_time());
  EXPECT_EQ(result["stream"]["finish_reason"], "length");
  EXPECT_GE(result["stream"]["chunks"], 2);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace conveyor::e2e
