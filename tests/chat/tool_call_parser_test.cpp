// The parsers of models' tool calls (`model.tool_call_parser`): what each makes of whole outputs,
// exactly, and that a streamed output gives the same answer however it is cut into pieces (at
// every split point into two, and byte by byte), with nothing reported that a later piece
// takes back.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "chat/tool_call_parser.hpp"
#include "tests/support/tool_call_answer.hpp"

using namespace conveyor::chat;

namespace {

using conveyor::test::answer;

answer to_answer(const parsed_tool_output& out) {
  answer a{out.content, {}};
  for (const auto& c : out.calls) a.calls.emplace_back(c.name, c.arguments);
  return a;
}

// The output read in the given pieces; each call's first event must name it, later ones not.
answer read_in_pieces(const std::string& family, const std::vector<std::string>& pieces) {
  auto parser = make_tool_call_parser(family);
  EXPECT_TRUE(parser);
  parsed_tool_output out;
  std::vector<bool> named;
  auto check = [&](const std::vector<tool_call_event>& events) {
    for (const auto& e : events) {
      if (e.type != tool_call_event::kind::call) continue;
      if (e.index >= named.size()) {
        EXPECT_EQ(e.index, named.size()) << "calls come in order";
        named.resize(e.index + 1, false);
      }
      EXPECT_EQ(!e.name.empty(), !named[e.index]) << "only a call's first event names it";
      named[e.index] = true;
    }
    out.add(events);
  };
  for (const auto& p : pieces) {
    std::vector<tool_call_event> events;
    parser->feed(p, events);
    check(events);
  }
  std::vector<tool_call_event> events;
  parser->finish(events);
  check(events);
  return to_answer(out);
}

answer read_whole(const std::string& family, const std::string& text) {
  return read_in_pieces(family, {text});
}

// Every way of cutting `text` in two, and byte by byte, gives the whole answer.
void expect_split_invariant(const std::string& family, const std::string& text) {
  const auto whole = read_whole(family, text);
  for (std::size_t cut = 0; cut <= text.size(); ++cut)
    EXPECT_EQ(read_in_pieces(family, {text.substr(0, cut), text.substr(cut)}), whole)
        << family << " cut at " << cut << " of: " << text;
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  EXPECT_EQ(read_in_pieces(family, bytes), whole) << family << " byte by byte: " << text;
}

}  // namespace

TEST(tool_call_parser, only_known_families_have_parsers) {
  EXPECT_TRUE(make_tool_call_parser("hermes"));
  EXPECT_TRUE(make_tool_call_parser("llama3_json"));
  EXPECT_FALSE(make_tool_call_parser("mistral"));
  EXPECT_FALSE(make_tool_call_parser(""));
}

TEST(tool_call_parser, hermes_reads_tool_call_blocks) {
  using calls = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(
      read_whole("hermes",
                 "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\","
                 "\"n\":1.50}}\n</tool_call>"),
      (answer{"", calls{{"get_weather", R"({"city": "Paris", "n": 1.5})"}}}));
  // Text before, two calls, whitespace between and after dropped.
  EXPECT_EQ(read_whole("hermes",
                       "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n"
                       "</tool_call>\n<tool_call>{\"name\": \"b\"}</tool_call>\n"),
            (answer{"Let me check.\n", calls{{"a", "{}"}, {"b", "{}"}}}));
  // Text after a call stays content; so does a block that is not a call, tags and all.
  EXPECT_EQ(
      read_whole("hermes",
                 "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": [1, \"é\"]}}</tool_call>"
                 " Done.<tool_call>{not json}</tool_call>"),
      (answer{" Done.<tool_call>{not json}</tool_call>", calls{{"a", R"({"x": [1, "é"]})"}}}));
  EXPECT_EQ(read_whole("hermes", "<tool_call>{\"arguments\": {}}</tool_call>"),
            (answer{"<tool_call>{\"arguments\": {}}</tool_call>", {}}));
  EXPECT_EQ(read_whole("hermes", "<tool_call>{\"name\": \"a\", \"arguments\": 5}</tool_call>"),
            (answer{"<tool_call>{\"name\": \"a\", \"arguments\": 5}</tool_call>", {}}));
  // A block the output ends inside: a call when its JSON is whole, else content.
  EXPECT_EQ(read_whole("hermes", "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n"),
            (answer{"", calls{{"a", "{}"}}}));
  EXPECT_EQ(read_whole("hermes", "<tool_call>\n{\"name\": \"a\", \"argu"),
            (answer{"<tool_call>\n{\"name\": \"a\", \"argu", {}}));
  // Plain text, and text that only looks like the tag's beginning.
  EXPECT_EQ(read_whole("hermes", "a < b <tool"), (answer{"a < b <tool", {}}));
  EXPECT_EQ(read_whole("hermes", ""), (answer{"", {}}));
}

TEST(tool_call_parser, hermes_streams_content_at_once_and_holds_back_a_possible_tag) {
  auto parser = make_tool_call_parser("hermes");
  std::vector<tool_call_event> events;
  parser->feed("Hello <to", events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, "Hello ");
  events.clear();
  parser->feed("ol_call>{\"name\": \"f\", \"arguments\": {}}", events);
  EXPECT_TRUE(events.empty());
  parser->feed("</tool_call>", events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, tool_call_event::kind::call);
  EXPECT_EQ(events[0].name, "f");
  EXPECT_EQ(events[0].text, "{}");
}

TEST(tool_call_parser, llama3_json_reads_objects_separated_by_semicolons) {
  using calls = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(read_whole("llama3_json",
                       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"),
            (answer{"", calls{{"get_weather", R"({"city": "Paris"})"}}}));
  EXPECT_EQ(read_whole("llama3_json",
                       " <|python_tag|>{\"name\": \"a\", \"parameters\": {\"s\": \"}{;\\\"\"}}; "
                       "{\"name\": \"b\", \"arguments\": {\"k\": true}} \n"),
            (answer{"", calls{{"a", R"({"s": "}{;\""})"}, {"b", R"({"k": true})"}}}));
  EXPECT_EQ(read_whole("llama3_json", "The weather is fine."),
            (answer{"The weather is fine.", {}}));
  EXPECT_EQ(read_whole("llama3_json", "  {\"answer\": 42} and more"),
            (answer{"{\"answer\": 42} and more", {}}));
  // Text after the calls, and an object the output ends inside, stay content.
  EXPECT_EQ(read_whole("llama3_json", "{\"name\": \"a\", \"parameters\": {}} Thanks"),
            (answer{"Thanks", calls{{"a", "{}"}}}));
  EXPECT_EQ(read_whole("llama3_json", "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\""),
            (answer{"{\"name\": \"b\"", calls{{"a", "{}"}}}));
  EXPECT_EQ(read_whole("llama3_json", "{\"name\": \"a\", \"parameters\": {}};  "),
            (answer{"", calls{{"a", "{}"}}}));
  EXPECT_EQ(read_whole("llama3_json", "<|python"), (answer{"<|python", {}}));
  EXPECT_EQ(read_whole("llama3_json", "   "), (answer{"   ", {}}));
}

TEST(tool_call_parser, streamed_answers_equal_whole_ones_at_every_split_point) {
  for (const std::string text :
       {"Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Zürich\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", "
        "\"arguments\": {\"q\": \"a</tool\"}}\n</tool_call> ok <tool_call>bad</tool_call>  ",
        "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>   \n<tool_call>{\"name\": "
        "\"b\", \"arguments\": {\"x\": 1e2}}",
        "plain < text <tool_cal", "<tool_call><tool_call>{}</tool_call></tool_call>"})
    expect_split_invariant("hermes", text);
  for (const std::string text :
       {" <|python_tag|>{\"name\": \"a\", \"parameters\": {\"s\": \"}{;\\\"\"}}; {\"name\": "
        "\"b\", \"parameters\": {\"k\": [1, {\"z\": null}]}} ; tail",
        "{\"name\": \"a\", \"parameters\": {}};{\"nope\": 1}", "<|python_tag|>hello", "<|pyth",
        "Hello {\"name\": \"a\"}", "{\"name\": \"a\", \"parameters\": {}};  "})
    expect_split_invariant("llama3_json", text);
}
