// Structured outputs end to end: the real `conveyor serve` with the official `openai` Python
// client (tests/e2e/structured_client.py), which validates every constrained output with the
// `jsonschema` package, re.fullmatch or the choice list; and curl for the raw 400s.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/conveyor_process.hpp"

using namespace conveyor::e2e;
using json = nlohmann::json;

namespace {

TEST(e2e_structured_outputs, openai_python_outputs_fit_their_formats) {
  ASSERT_EQ(
      run_shell(shell_quote(CONVEYOR_TEST_PYTHON) + " -c 'import openai, jsonschema' 2>&1").status,
      0)
      << "openai or jsonschema is missing in " CONVEYOR_TEST_PYTHON
         ": run scripts/setup.sh --tests";
  conveyor_process server{{}};
  ASSERT_TRUE(server.ok()) << server.error();
  auto run = run_shell(shell_quote(CONVEYOR_TEST_PYTHON) +
                       " " CONVEYOR_SOURCE_DIR "/tests/e2e/structured_client.py " +
                       shell_quote(server.url() + "/v1") + " 2>&1");
  ASSERT_EQ(run.status, 0) << run.out;
  const auto r = json::parse(run.out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << run.out;
  // Every output that stopped is valid; most stop (a few may run to max_tokens inside a string).
  for (const char* name : {"chat_json_schema", "completion_json_schema", "json_object", "regex",
                           "choice", "grammar", "n"}) {
    SCOPED_TRACE(name);
    const auto& t = r[name];
    EXPECT_TRUE(t["invalid"].empty()) << t;
    if (name != std::string{"json_object"}) {
      EXPECT_GE(t["stop"].get<int>(), name == std::string{"n"} ? 3 : 9) << t;
    }
  }
  EXPECT_EQ(r["json_object"]["all_objects"], true);
  // Bounded formats always stop; temperature 1 reaches different outputs.
  for (const char* name : {"regex", "choice", "grammar"})
    EXPECT_EQ(r[name]["stop"], 12) << name << ": " << r[name];
  for (const char* name : {"regex", "grammar", "chat_json_schema"})
    EXPECT_GE(r[name]["distinct"].get<int>(), 2) << name;
  EXPECT_EQ(r["key_order"], json::array({"name", "age", "mood", "friends"}));
  for (const auto& pair : r["stream_agrees"]) EXPECT_EQ(pair, json::array({true, true}));
  EXPECT_EQ(r["bad_schema"]["status"], 400);
  EXPECT_EQ(r["bad_schema"]["param"], "response_format");
  EXPECT_EQ(r["bad_regex"]["status"], 400);
  EXPECT_EQ(r["bad_regex"]["param"], "structured_outputs.regex");
  EXPECT_NE(r["bad_regex"]["message"].get<std::string>().find("the regular expression cannot be "
                                                              "compiled"),
            std::string::npos)
      << r["bad_regex"];
  EXPECT_EQ(r["bad_grammar"]["param"], "structured_outputs.grammar");
  EXPECT_EQ(r["two_formats"]["status"], 400);
  EXPECT_EQ(r["two_formats"]["param"], "structured_outputs.regex");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
