// Tool calls end to end: the real `conveyor serve` (stories260K with tests/e2e/tools_chat.jinja
// and model.tool_call_parser "hermes") with the official `openai` Python client
// (tests/e2e/tools_client.py), which validates every call's arguments against its function's
// schema with the `jsonschema` package; sampling at temperature 1 over many seeds, so that only
// the constraint can make them valid. tool_choice "auto" is read from a Hermes call that
// structured_outputs' regex forces the model into, so the check does not depend on the model.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/conveyor_process.hpp"

using namespace conveyor::e2e;
using json = nlohmann::json;

namespace {

TEST(e2e_tool_calls, openai_python_calls_fit_their_functions) {
  ASSERT_EQ(
      run_shell(shell_quote(CONVEYOR_TEST_PYTHON) + " -c 'import openai, jsonschema' 2>&1").status,
      0)
      << "openai or jsonschema is missing in " CONVEYOR_TEST_PYTHON
         ": run scripts/setup.sh --tests";
  conveyor_process server{{"--set", "model.chat_template=tests/e2e/tools_chat.jinja", "--set",
                           "model.tool_call_parser=hermes"}};
  ASSERT_TRUE(server.ok()) << server.error();
  auto run = run_shell(shell_quote(CONVEYOR_TEST_PYTHON) +
                       " " CONVEYOR_SOURCE_DIR "/tests/e2e/tools_client.py " +
                       shell_quote(server.url() + "/v1") + " 2>&1");
  ASSERT_EQ(run.status, 0) << run.out;
  const auto r = json::parse(run.out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << run.out;
  // stories260K never closes an array of calls on its own: "required" answers run to
  // max_tokens, and each call they completed fits its function.
  EXPECT_TRUE(r["required"]["invalid"].empty()) << r["required"];
  EXPECT_TRUE(r["required"]["not_calls"].empty()) << r["required"];
  EXPECT_GE(r["required"]["cut_calls"].get<int>(), 24) << r["required"];
  for (const char* name : {"single", "named", "auto"}) {
    SCOPED_TRACE(name);
    const auto& t = r[name];
    // Every answer that finished made calls, and every call fits its function.
    EXPECT_TRUE(t["invalid"].empty()) << t;
    EXPECT_TRUE(t["not_calls"].empty()) << t;
    EXPECT_GE(t["tool_calls"].get<int>(), 6) << t;
    EXPECT_GE(t["calls"].get<int>(), t["tool_calls"].get<int>()) << t;
    EXPECT_GE(t["distinct"].get<int>(), 2) << t;
  }
  EXPECT_EQ(r["single"]["max_calls"], 1);
  EXPECT_EQ(r["named"]["max_calls"], 1);
  EXPECT_EQ(r["named_functions"], json::array({"get_time"}));
  EXPECT_EQ(r["auto"]["max_calls"], 1);
  EXPECT_EQ(r["auto_content"], json::array({"None"})) << "the forced call leaves no content";
  for (const auto& a : r["stream_agrees"])
    EXPECT_EQ(a, json::array({true, true, true, true})) << r["stream_agrees"];
  EXPECT_EQ(r["follow_up"]["calls"], 1) << r["follow_up"];
  EXPECT_EQ(r["follow_up"]["content_is_text"], true) << r["follow_up"];
  for (const auto& [name, param] :
       {std::pair{"unknown_function", "tool_choice"},
        {"no_tools", "tool_choice"},
        {"bad_name", "tools[0].function.name"},
        {"bad_arguments", "messages[1].tool_calls[0].function.arguments"}}) {
    EXPECT_EQ(r[name]["status"], 400) << name;
    EXPECT_EQ(r[name]["param"], param) << name;
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
