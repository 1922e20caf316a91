// The chat-template renderer against jinja2: every committed rendering of
// tests/fixtures/chat_templates/expected.json (made by tools/fixtures/make_chat_templates.py)
// must come out byte for byte, and what the renderer does not support must fail at parse time
// naming the construct and its line.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chat/chat_template.hpp"

using namespace conveyor;
using namespace conveyor::chat;
using json = nlohmann::json;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  EXPECT_TRUE(in) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string fixture_dir = std::string{CONVEYOR_SOURCE_DIR} + "/tests/fixtures/chat_templates/";

std::vector<chat_message> to_messages(const json& list) {
  std::vector<chat_message> out;
  for (const auto& m : list) out.push_back({m.at("role"), m.at("content")});
  return out;
}

chat_template parse_ok(const std::string& source, special_tokens tokens = {"<s>", "</s>"}) {
  auto t = chat_template::parse(source, std::move(tokens));
  EXPECT_TRUE(t) << message_of(t.error());
  return *t;
}

std::string parse_error(const std::string& source) {
  auto t = chat_template::parse(source, {});
  if (t) return "(parsed)";
  EXPECT_EQ(code_of(t.error()), ec::bad_config);
  return message_of(t.error());
}

std::string render_one(const std::string& source, const std::vector<chat_message>& messages = {
                                                      {"user", "hi"}}) {
  auto t = parse_ok(source);
  auto out = t.render(messages, false);
  if (!out) return "error: " + message_of(out.error());
  return *out;
}

}  // namespace

TEST(chat_template, equals_jinja2_for_every_committed_rendering) {
  auto fixture = json::parse(read_file(fixture_dir + "expected.json"));
  const auto& renderings = fixture.at("renderings");
  ASSERT_GE(renderings.size(), 80u);
  int outputs = 0, errors = 0;
  for (const auto& r : renderings) {
    const std::string name = r.at("template");
    const auto& tokens = fixture.at("templates").at(name);
    auto t = parse_ok(
        read_file(std::string{CONVEYOR_SOURCE_DIR} + "/" + tokens.at("file").get<std::string>()),
        {tokens.at("bos_token"), tokens.at("eos_token")});
    auto messages = to_messages(fixture.at("conversations").at(r.at("conversation").get<std::string>()));
    bool add_generation_prompt = r.at("add_generation_prompt");
    auto out = t.render(messages, add_generation_prompt);
    std::string what = name + " / " + r.at("conversation").get<std::string>() +
                       (add_generation_prompt ? " / generation prompt" : "");
    if (r.contains("output")) {
      ++outputs;
      EXPECT_TRUE(out) << what << ": " << message_of(out.error());
      if (out) {
        EXPECT_EQ(*out, r.at("output").get<std::string>()) << what;
      }
    } else {
      ++errors;
      EXPECT_FALSE(out) << what << " rendered, jinja2 raised " << r.at("error");
      if (out) continue;
      EXPECT_EQ(code_of(out.error()), ec::bad_request);
      EXPECT_EQ(message_of(out.error()), "the chat template refused the conversation: " +
                                             r.at("error").get<std::string>())
          << what;
    }
  }
  EXPECT_GT(outputs, 60);
  EXPECT_GT(errors, 4);
}

TEST(chat_template, the_embedded_models_template_gives_role_lines) {
  auto t = parse_ok(
      read_file(std::string{CONVEYOR_SOURCE_DIR} + "/models/stories260K/chat_template.jinja"));
  auto p = t.render({{"system", "Be brief."}, {"user", " Hi "}}, true);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, "System: Be brief.\nUser: Hi\nAssistant:");
}

TEST(chat_template, special_tokens_are_written_as_text) {
  auto t =
      parse_ok("{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}");
  auto p = t.render({{"user", "x"}}, false);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, "<s>x</s>");
}

TEST(chat_template, unsupported_constructs_fail_at_parse_time_with_their_line) {
  EXPECT_EQ(parse_error("hello\n\n{% call greet(x) %}{{ x }}{% endcall %}"),
            "chat template line 3: unsupported tag 'call'");
  EXPECT_EQ(parse_error("{% include 'other.jinja' %}"),
            "chat template line 1: unsupported tag 'include'");
  EXPECT_EQ(parse_error("{{ x }}\n{{ x | wordcount }}"),
            "chat template line 2: unsupported filter 'wordcount'");
  EXPECT_EQ(parse_error("{% if x is callable %}{% endif %}"),
            "chat template line 1: unsupported test 'callable'");
  EXPECT_EQ(parse_error("\n{{ lipsum(2) }}"),
            "chat template line 2: unsupported function 'lipsum'");
  EXPECT_EQ(parse_error("{{ greet(1) }}{% macro greet(x) %}{{ x }}{% endmacro %}"),
            "chat template line 1: unsupported function 'greet'");
  EXPECT_EQ(parse_error("{{ messages.append(1) }}"),
            "chat template line 1: unsupported method 'append'");
  EXPECT_EQ(parse_error("{% set x %}body{% endset %}"),
            "chat template line 1: unsupported tag 'set' with a body");
  EXPECT_EQ(parse_error("{% for m in messages %}\n{{ m }}"),
            "chat template line 2: missing '{% endfor %}'");
  EXPECT_EQ(parse_error("{{ 'abc }}"), "chat template line 1: unclosed string literal");
  EXPECT_EQ(parse_error("a\n{% if x %}\n{{ x "), "chat template line 3: unclosed '{{'");
  EXPECT_EQ(parse_error("{% endif %}"), "chat template line 1: unexpected '{% endif %}'");
  EXPECT_EQ(parse_error("{% break %}"), "chat template line 1: 'break' outside a loop");
}

TEST(chat_template, raise_exception_names_the_message) {
  auto t = parse_ok("{% if messages[0].role != 'user' %}{{ raise_exception('only users, got ' + "
                    "messages[0].role) }}{% endif %}ok");
  auto out = t.render({{"assistant", "x"}}, false);
  ASSERT_FALSE(out);
  EXPECT_EQ(code_of(out.error()), ec::bad_request);
  EXPECT_EQ(message_of(out.error()),
            "the chat template refused the conversation: only users, got assistant");
  auto fine = t.render({{"user", "x"}}, false);
  ASSERT_TRUE(fine);
  EXPECT_EQ(*fine, "ok");
}

TEST(chat_template, render_errors_name_the_line) {
  EXPECT_EQ(render_one("line one\n{{ nothing.attribute }}"),
            "error: rendering the chat template failed: chat template line 2: cannot read "
            "attribute 'attribute' of an undefined value");
  EXPECT_EQ(render_one("{{ messages[0].content + 1 }}"),
            "error: rendering the chat template failed: chat template line 1: unsupported "
            "operand types for '+': string and integer");
  EXPECT_EQ(render_one("{% set x = 1 %}{% set x.y = 2 %}"),
            "error: rendering the chat template failed: chat template line 1: cannot assign "
            "attribute 'y' of 'x', a integer (only namespaces take attributes)");
}

TEST(chat_template, whitespace_control_matches_jinja_with_trim_and_lstrip_blocks) {
  // trim_blocks drops the newline after a block tag, lstrip_blocks the indentation before one;
  // neither touches {{ }}; '-' strips all whitespace on its side; '+' keeps the indentation.
  EXPECT_EQ(render_one("a\n  {% if true %}\nb\n  {% endif %}\nc"), "a\nb\nc");
  EXPECT_EQ(render_one("a\n  {{ 'x' }}\nb"), "a\n  x\nb");
  EXPECT_EQ(render_one("a  \n  {%- if true -%}  \n b{% endif %}"), "ab");
  EXPECT_EQ(render_one("a\n  {%+ if true %}b{% endif %}"), "a\n  b");
  EXPECT_EQ(render_one("a\n  {# note #}\nb\n"), "a\nb");
  EXPECT_EQ(render_one("x {% if true %}y{% endif %}"), "x y");
}

TEST(chat_template, loop_scopes_and_namespaces_behave_as_in_jinja) {
  EXPECT_EQ(render_one("{% set x = 1 %}{% for m in [1, 2] %}{% set x = x + m %}{% endfor %}{{ x }}"),
            "1");
  EXPECT_EQ(render_one("{% set ns = namespace(x=1) %}{% for m in [1, 2] %}{% set ns.x = ns.x + m "
                       "%}{% endfor %}{{ ns.x }}"),
            "4");
  EXPECT_EQ(render_one("{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ b }}{% endfor "
                       "%}{{ loop.index }};{% endfor %}"),
            "1x2y1;1x2y2;");
}
