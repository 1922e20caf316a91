// Conversations with tools through the published templates of models that call them (Qwen2.5,
// Hermes 2 Pro, Llama 3.1 and 3.2): every committed rendering of
// tests/fixtures/chat_templates/tools.json (transformers' render_jinja_template, made by
// tools/fixtures/make_chat_templates.py) must come out byte for byte. Then what those templates
// need of the renderer, each alone: macros, select/reject, strftime_now, JSON as values.
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chat/chat_template.hpp"
#include "chat/json_value.hpp"
#include "chat/template_source.hpp"

using namespace conveyor;
using namespace conveyor::chat;
using ojson = nlohmann::ordered_json;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  EXPECT_TRUE(in) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

value to_value(const ojson& j) {
  auto v = value_from_json(j);
  EXPECT_TRUE(v) << message_of(v.error());
  return v ? *v : value{};
}

// A fixture message as the server builds it from a request: content null for a message that
// only calls functions, the arguments a mapping.
chat_message to_message(const ojson& m) {
  chat_message out;
  out.role = m.at("role");
  if (m.contains("content") && !m.at("content").is_null())
    out.content = m.at("content").get<std::string>();
  if (m.contains("tool_calls"))
    for (const auto& c : m.at("tool_calls"))
      out.tool_calls.push_back(
          {c.at("id"), c.at("function").at("name"), to_value(c.at("function").at("arguments"))});
  if (m.contains("tool_call_id")) out.tool_call_id = m.at("tool_call_id");
  if (m.contains("name")) out.name = m.at("name");
  return out;
}

// The fixtures' clock: tools.json's "now".
std::tm fixture_now(const std::string& iso) {
  std::tm tm{};
  std::istringstream in{iso};
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  EXPECT_FALSE(in.fail()) << iso;
  tm.tm_isdst = -1;
  std::mktime(&tm);  // fills the weekday and the day of the year
  return tm;
}

std::string render_one(const std::string& source, const render_options& options = {},
                       const std::vector<chat_message>& messages = {{"user", "hi"}}) {
  auto t = chat_template::parse(source, {"<s>", "</s>"});
  if (!t) return "parse error: " + message_of(t.error());
  auto out = t->render(messages, options);
  if (!out) return "error: " + message_of(out.error());
  return *out;
}

}  // namespace

TEST(tool_templates, equal_transformers_for_every_committed_rendering) {
  const auto fixture = ojson::parse(
      read_file(std::string{CONVEYOR_SOURCE_DIR} + "/tests/fixtures/chat_templates/tools.json"));
  const auto& renderings = fixture.at("renderings");
  ASSERT_GE(renderings.size(), 60u);
  const value tools = to_value(fixture.at("tools"));
  const std::tm now = fixture_now(fixture.at("now"));
  int outputs = 0, errors = 0;
  for (const auto& r : renderings) {
    const std::string name = r.at("template");
    const auto& entry = fixture.at("templates").at(name);
    auto t = chat_template::parse(
        read_file(std::string{CONVEYOR_SOURCE_DIR} + "/" + entry.at("file").get<std::string>()),
        {entry.at("bos_token"), entry.at("eos_token")});
    ASSERT_TRUE(t) << name << ": " << message_of(t.error());
    std::vector<chat_message> messages;
    for (const auto& m : fixture.at("conversations").at(r.at("conversation").get<std::string>()))
      messages.push_back(to_message(m));
    render_options options;
    options.add_generation_prompt = r.at("add_generation_prompt");
    options.tools = r.at("tools").get<bool>() ? tools : value::none();
    options.now = now;
    auto out = t->render(messages, options);
    const std::string what = name + " / " + r.at("conversation").get<std::string>() +
                             (r.at("tools").get<bool>() ? " / tools" : "") +
                             (options.add_generation_prompt ? " / generation prompt" : "");
    if (r.contains("output")) {
      ++outputs;
      ASSERT_TRUE(out) << what << ": " << message_of(out.error());
      EXPECT_EQ(*out, r.at("output").get<std::string>()) << what;
    } else {
      ++errors;
      ASSERT_FALSE(out) << what << " rendered, transformers raised " << r.at("error");
      EXPECT_EQ(message_of(out.error()),
                "the chat template refused the conversation: " + r.at("error").get<std::string>())
          << what;
    }
  }
  EXPECT_GT(outputs, 50);
  EXPECT_GE(errors, 4);
}

TEST(tool_templates, macros_return_what_their_body_renders) {
  EXPECT_EQ(render_one("{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!"
                       "{% endmacro %}{{ greet('Ann') }} {{ greet('Bo', greeting='Hi') }} "
                       "{{ greet('Cy', 'Hey') | upper }}"),
            "Hello, Ann! Hi, Bo! HEY, CY!");
  // Recursion, a missing argument is undefined, `set` inside stays inside.
  EXPECT_EQ(render_one("{%- macro count(n) -%}{%- set x = n -%}{{ n }}{% if n > 0 %}"
                       "{{ count(n - 1) }}{% endif %}{%- endmacro -%}{% set x = 'top' %}"
                       "{{ count(3) }} {{ x }}"),
            "3210 top");
  EXPECT_EQ(render_one("{% macro m(a, b) %}[{{ a }}|{{ b is defined }}]{% endmacro %}{{ m(1) }}"),
            "[1|False]");
  // The body sees its parameters, the top level and the variables, not the caller's loop.
  EXPECT_EQ(render_one("{% set top = 't' %}{% macro m() %}{{ top }}{{ item is defined }}"
                       "{{ bos_token }}{% endmacro %}{% for item in [1] %}{{ m() }}{% endfor %}"),
            "tFalse<s>");
  EXPECT_EQ(render_one("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}"),
            "error: rendering the chat template failed: chat template line 1: macro 'm' takes 1 "
            "arguments, got 2");
  EXPECT_EQ(render_one("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=2) }}"),
            "error: rendering the chat template failed: chat template line 1: macro 'm' has no "
            "parameter 'b'");
  EXPECT_EQ(render_one("{% if false %}{% macro m() %}x{% endmacro %}{% endif %}{{ m() }}"),
            "error: rendering the chat template failed: chat template line 1: macro 'm' is not "
            "defined");
  EXPECT_EQ(render_one("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}"),
            "error: rendering the chat template failed: chat template line 1: macro calls nested "
            "more than 32 deep");
  // Calls that double per level run out of work, not of time.
  const auto doubling = render_one(
      "{% macro m(n) %}{% if n %}{{ m(n - 1) }}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(30) }}");
  EXPECT_NE(doubling.find("units of work"), std::string::npos) << doubling;
  EXPECT_EQ(render_one("{% for x in [1] %}{% macro m() %}{% break %}{% endmacro %}{% endfor %}"),
            "parse error: chat template line 1: 'break' outside a loop");
}

TEST(tool_templates, select_and_reject_apply_a_test) {
  EXPECT_EQ(render_one("{{ ['a', 'code', 'b'] | reject('equalto', 'code') | join(', ') }}"),
            "a, b");
  EXPECT_EQ(render_one("{{ [0, 1, 2, 3] | select('odd') | list }}"), "[1, 3]");
  EXPECT_EQ(render_one("{{ [0, '', 'x', none] | select | list }}"), "['x']");
  EXPECT_EQ(render_one("{{ [0, '', 'x'] | reject | list }}"), "[0, '']");
}

TEST(tool_templates, strftime_now_formats_the_rendering_time) {
  render_options options;
  std::tm tm{};
  tm.tm_year = 2025 - 1900;
  tm.tm_mon = 2;
  tm.tm_mday = 4;
  tm.tm_hour = 9;
  tm.tm_min = 30;
  tm.tm_wday = 2;
  options.now = tm;
  EXPECT_EQ(render_one("{{ strftime_now('%d %b %Y, %A %H:%M') }}", options),
            "04 Mar 2025, Tuesday 09:30");
  EXPECT_EQ(render_one("{{ strftime_now is defined }} {{ strftime_now('') }}|", options), "True |");
  EXPECT_EQ(render_one("{% set strftime_now = 1 %}{{ strftime_now }}", options), "1");
  EXPECT_EQ(render_one("{{ strftime_now(1) }}", options),
            "error: rendering the chat template failed: chat template line 1: strftime_now() "
            "takes a format string");
  // Without a time given, the clock's: today's year.
  const std::time_t t = std::time(nullptr);
  std::tm today{};
  localtime_r(&t, &today);
  EXPECT_EQ(render_one("{{ strftime_now('%Y') }}"), std::to_string(today.tm_year + 1900));
}

TEST(tool_templates, json_becomes_values_in_key_order) {
  auto v = value_from_json_text(
      R"({"b": 1, "a": [true, null, 1.5, "x", 18446744073709551615], "c": {}})");
  ASSERT_TRUE(v);
  std::string out;
  ASSERT_EQ(v->to_json(out, -1, 1 << 20), value::json_error::none);
  EXPECT_EQ(out, R"({"b": 1, "a": [true, null, 1.5, "x", 1.8446744073709552e+19], "c": {}})");
  EXPECT_FALSE(value_from_json_text("{\"a\": "));
  std::string deep(200, '[');
  deep += std::string(200, ']');
  auto too_deep = value_from_json_text(deep);
  ASSERT_FALSE(too_deep);
  EXPECT_EQ(message_of(too_deep.error()), "JSON nested more than 100 deep");
}

TEST(tool_templates, messages_carry_their_tool_keys_only_when_they_have_them) {
  const std::string show =
      "{% for m in messages %}{{ m | tojson }}\n{% endfor %}{{ tools | tojson }}";
  chat_message call{"assistant", std::nullopt};
  call.tool_calls.push_back({"call_1", "f", *value_from_json_text(R"({"x": 1})")});
  chat_message result{"tool", std::string{"42"}};
  result.tool_call_id = "call_1";
  render_options options;
  options.tools = *value_from_json_text(R"([{"type": "function"}])");
  EXPECT_EQ(
      render_one(show, options, {{"user", "hi"}, call, result}),
      "{\"role\": \"user\", \"content\": \"hi\"}\n"
      "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call_1\", "
      "\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]}\n"
      "{\"role\": \"tool\", \"content\": \"42\", \"tool_call_id\": \"call_1\"}\n"
      "[{\"type\": \"function\"}]");
}

TEST(tool_templates, a_models_tool_use_template_serves_conversations_with_tools) {
  const std::vector<named_template> both{{"default", "D{{ tools }}"}, {"tool_use", "T"}};
  auto choice = select_chat_template("", both, "m/", {});
  ASSERT_TRUE(choice);
  ASSERT_TRUE(choice->tmpl && choice->tool_tmpl);
  EXPECT_EQ(*choice->tmpl->render({{"user", "x"}}, false), "DNone");
  EXPECT_EQ(*choice->tool_tmpl->render({{"user", "x"}}, false), "T");
  // Alone it serves conversations with tools; those without are refused.
  auto only = select_chat_template("", {{"tool_use", "T"}}, "m/", {});
  ASSERT_TRUE(only);
  EXPECT_FALSE(only->tmpl);
  EXPECT_TRUE(only->tool_tmpl);
  EXPECT_NE(only->refusal.find("none named \"default\""), std::string::npos) << only->refusal;
  // model.chat_template serves every conversation.
  auto set = select_chat_template("S{{ tools }}", both, "m/", {});
  ASSERT_TRUE(set);
  EXPECT_FALSE(set->tool_tmpl);
  // A tool_use template outside the subset stops the start, naming it.
  auto bad = select_chat_template("", {{"default", "D"}, {"tool_use", "{% call x %}"}}, "m/", {});
  ASSERT_FALSE(bad);
  EXPECT_EQ(message_of(bad.error()), "m/ (tool_use): chat template line 1: unsupported tag 'call'");
}
