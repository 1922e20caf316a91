// No template can hang or crash the renderer: arithmetic is checked (Python's integers are
// unbounded, Conveyor's are 64-bit: what does not fit is an error, never undefined behaviour),
// loops, repetition, nesting, the work of one rendering and its output are bounded, and each
// limit fails the rendering with ec::bad_request naming what was exceeded and the line.
#include <string>

#include <gtest/gtest.h>

#include "chat/chat_template.hpp"

using namespace conveyor;
using namespace conveyor::chat;

namespace {

// Renders `source` over one user message; the text, or "error: MESSAGE" (the code must be
// bad_request: a rendering fails on the template, never as an internal error).
std::string render(const std::string& source) {
  auto t = chat_template::parse(source, {"<s>", "</s>"});
  if (!t) return "parse error: " + message_of(t.error());
  auto out = t->render({{"user", "hi"}}, true);
  if (out) return *out;
  EXPECT_EQ(code_of(out.error()), ec::bad_request) << message_of(out.error());
  return "error: " + message_of(out.error());
}

// Whether `text` holds `part`, with the text in the failure message.
::testing::AssertionResult has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

const std::string int64_min = "(-9223372036854775807 - 1)";

}  // namespace

TEST(template_limits, range_that_would_overflow_is_an_error) {
  // stop - start does not fit in 64 bits.
  EXPECT_TRUE(has(render("{% for i in range(-9223372036854775807, 9223372036854775807) %}"
                         "{% endfor %}"),
                  "error: rendering the chat template failed: chat template line 1: range() of "));
  EXPECT_TRUE(has(render("{{ range(9223372036854775807, " + int64_min + ", -1) | length }}"),
                  "range() of "));
  // jinja2's sandbox refuses ranges of more than 100000 items.
  EXPECT_TRUE(has(render("{{ range(100001) | length }}"), "range() of more than 100000 items"));
  EXPECT_EQ(render("{{ range(100000) | length }}"), "100000");
  // A step so large that start + step overflows: one item, as in Python.
  EXPECT_EQ(render("{{ range(9223372036854775800, 9223372036854775807, 9223372036854775807) | "
                   "list }}"),
            "[9223372036854775800]");
  EXPECT_EQ(render("{{ range(3) | list }} {{ range(5, 0, -2) | list }} {{ range(0) | list }}"),
            "[0, 1, 2] [5, 3, 1] []");
}

TEST(template_limits, power_is_computed_by_squaring_and_checked) {
  // Python computes 1 ** (2**63 - 1) at once; a loop of that many multiplications never ends.
  EXPECT_EQ(render("{{ 1 ** 9223372036854775807 }} {{ (-1) ** 9223372036854775807 }} "
                   "{{ 0 ** 9223372036854775807 }} {{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 2 ** -1 }}"),
            "1 -1 0 4611686018427387904 -9223372036854775808 0.5");
  EXPECT_TRUE(has(render("{{ 2 ** 9223372036854775807 }}"),
                  "chat template line 1: integer overflow in '**'"));
  EXPECT_TRUE(has(render("{{ 2 ** 63 }}"), "integer overflow in '**'"));
  EXPECT_TRUE(has(render("{{ 3 ** 41 }}"), "integer overflow in '**'"));
}

TEST(template_limits, int64_min_modulo_and_division_by_minus_one_are_defined) {
  // Python: INT64_MIN % -1 == 0; INT64_MIN // -1 == 2**63 (does not fit).
  EXPECT_EQ(render("{{ " + int64_min + " % -1 }}"), "0");
  EXPECT_TRUE(has(render("{{ " + int64_min + " // -1 }}"), "integer overflow in '//'"));
  EXPECT_EQ(render("{{ " + int64_min + " is divisibleby(-1) }}"), "True");
  EXPECT_EQ(render("{{ -7 % 3 }} {{ 7 % -3 }} {{ -7 // 2 }}"), "2 -2 -4");
}

TEST(template_limits, other_integer_overflows_are_errors) {
  EXPECT_TRUE(has(render("{{ 9223372036854775807 + 1 }}"), "integer overflow in '+'"));
  EXPECT_TRUE(has(render("{{ " + int64_min + " - 1 }}"), "integer overflow in '-'"));
  EXPECT_TRUE(has(render("{{ 4294967296 * 4294967296 }}"), "integer overflow in '*'"));
  EXPECT_TRUE(has(render("{{ -" + int64_min + " }}"), "integer overflow in '-'"));
  EXPECT_TRUE(has(render("{{ " + int64_min + " | abs }}"), "integer overflow in 'abs'"));
  EXPECT_TRUE(has(render("{{ 1e300 | int }}"), "out of range"));
  EXPECT_TRUE(has(render("{{ '99999999999999999999' | int }}"), "out of range"));
  EXPECT_TRUE(has(render("{{ 99999999999999999999 }}"),
                  "parse error: chat template line 1: integer literal 99999999999999999999 is "
                  "out of range"));
  EXPECT_EQ(render("{{ 'nan' | float | int }} {{ 9223372036854775807 - 1 }}"),
            "0 9223372036854775806");
}

TEST(template_limits, repetition_is_bounded) {
  EXPECT_TRUE(has(render("{{ 'x' * 9223372036854775807 }}"), "exceeds"));
  EXPECT_TRUE(has(render("{{ ([1, 2] * 9223372036854775807) | length }}"), "exceeds"));
  EXPECT_TRUE(has(render("{{ 1000000 * ('abc' * 1000000) }}"), "exceeds"));
  EXPECT_EQ(render("{{ 'ab' * 3 }} {{ [1] * 2 }} {{ 'x' * -5 }}"), "ababab [1, 1] ");
}

TEST(template_limits, output_is_capped) {
  // 10^4 x 10^4 bytes: fits no cap of a prompt.
  EXPECT_TRUE(has(render("{% for i in range(10000) %}{{ 'x' * 10000 }}{% endfor %}"),
                  "the rendered prompt exceeds"));
  // Doubling a string in a loop.
  EXPECT_TRUE(has(render("{% set ns = namespace(s='x') %}{% for i in range(64) %}"
                         "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}"),
                  "exceeds"));
}

TEST(template_limits, loop_iterations_are_capped) {
  EXPECT_TRUE(has(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                         "{% endfor %}"),
                  "loop iterations"));
}

TEST(template_limits, deep_nesting_is_refused_at_parse_time) {
  const int n = 100000;
  EXPECT_TRUE(has(render("{{ " + std::string(n, '(') + "1" + std::string(n, ')') + " }}"),
                  "parse error: chat template line 1: nested more than"));
  EXPECT_TRUE(
      has(render("{{ " + std::string(n, '[') + std::string(n, ']') + " }}"), "nested more than"));
  std::string sum = "{{ 1";
  for (int i = 0; i < n; ++i) sum += " + 1";
  EXPECT_TRUE(has(render(sum + " }}"), "nested more than"));
  std::string nots = "{{ ";
  for (int i = 0; i < n; ++i) nots += "not ";
  EXPECT_TRUE(has(render(nots + "1 }}"), "nested more than"));
  std::string blocks;
  for (int i = 0; i < n; ++i) blocks += "{% if true %}";
  EXPECT_TRUE(has(render(blocks), "nested more than"));
}

TEST(template_limits, values_nest_boundedly_and_namespaces_do_not_cycle) {
  // A list nested in a loop as deep as it goes.
  EXPECT_TRUE(has(render("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
                         "{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}"),
                  "nested more than"));
  // A namespace holding itself: printing it and tojson do not recurse (tojson refuses, as
  // Python's json.dumps refuses a Namespace).
  EXPECT_EQ(
      render("{% set ns = namespace() %}{% set ns.me = ns %}{% set ns.l = [ns] %}{{ ns.me }}"),
      "<Namespace>");
  EXPECT_TRUE(has(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns | tojson }}"),
                  "tojson cannot serialize a namespace"));
  EXPECT_TRUE(has(render("{% set ns = namespace() %}{% for k in ns %}{% endfor %}"),
                  "cannot iterate over a namespace"));
}

TEST(template_limits, quadratic_templates_run_out_of_work) {
  // Each step builds a string the size of all before it: about 5 * 10^11 bytes in all.
  EXPECT_TRUE(has(render("{% set ns = namespace(s='') %}{% for i in range(1000) %}"
                         "{% for j in range(1000) %}{% set ns.s = ns.s ~ 'x' %}{% endfor %}"
                         "{% endfor %}"),
                  "work"));
  // Searching a long text for a long needle, again and again.
  EXPECT_TRUE(has(render("{% set a = 'a' * 4000000 %}{% set b = 'a' * 2000000 ~ 'b' %}"
                         "{% for i in range(1000) %}{{ b in a }}{% endfor %}"),
                  "work"));
}

namespace {

// Renders with `limits`, as render() does with the defaults.
std::string render_within(const std::string& source, render_limits limits) {
  auto t = chat_template::parse(source, {"<s>", "</s>"}, limits);
  if (!t) return "parse error: " + message_of(t.error());
  auto out = t->render({{"user", "hi"}}, true);
  return out ? *out : "error: " + message_of(out.error());
}

}  // namespace

TEST(template_limits, each_limit_holds_exactly_and_names_its_value) {
  render_limits limits;
  limits.max_output_bytes = 10;
  EXPECT_EQ(render_within("{{ 'x' * 10 }}", limits), "xxxxxxxxxx");
  EXPECT_EQ(render_within("0123456789{{ 'x' }}", limits),
            "error: rendering the chat template failed: chat template line 1: the rendered "
            "prompt exceeds 10 bytes");
  EXPECT_EQ(render_within("{% set s = 'x' * 11 %}", limits),
            "error: rendering the chat template failed: chat template line 1: the template "
            "builds a value that exceeds 10 bytes");

  limits = {};
  limits.max_loop_iterations = 6;
  EXPECT_EQ(render_within("{% for i in range(3) %}{% for j in range(1) %}{{ i }}{% endfor %}"
                          "{% endfor %}",
                          limits),
            "012");
  EXPECT_EQ(render_within("{% for i in range(7) %}{% endfor %}", limits),
            "error: rendering the chat template failed: chat template line 1: the template runs "
            "more than 6 loop iterations");
  // A loop's `if` filter looks at every item.
  EXPECT_TRUE(has(render_within("{% for i in range(4) if i > 2 %}{% endfor %}{% for i in "
                                "range(3) %}{% endfor %}",
                                limits),
                  "more than 6 loop iterations"));

  limits = {};
  limits.max_work = 1000;
  EXPECT_EQ(render_within("{% set s = 'x' * 900 %}ok", limits), "ok");
  EXPECT_EQ(render_within("{% set s = 'x' * 600 %}{% set t = s ~ 'y' %}", limits),
            "error: rendering the chat template failed: chat template line 1: the template does "
            "more than 1000 units of work (bytes and items built, searched or walked): a loop or "
            "a repetition too large");
}
