// Tools on POST /v1/chat/completions without sockets: the fields checked and named in every
// refusal, what the template sees, the schemas that force calls (as vLLM builds them), the
// readers of forced answers (streamed equal to whole at every split point), and the answers,
// whole and streamed, that completion_task renders from a choice's text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.hpp"
#include "server/completion_task.hpp"
#include "server/forced_tool_calls.hpp"
#include "server/openai.hpp"
#include "server/tool_schema.hpp"
#include "tests/support/tool_call_answer.hpp"
#include "task_steps.hpp"

namespace conveyor::server::test {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using detail::completion_task;

// Shows what the template sees: the tools and every message as JSON.
chat::chat_template showing_template() {
  auto t = chat::chat_template::parse(
      "{{ tools | tojson }}\n{% for m in messages %}{{ m | tojson }}\n{% endfor %}", {"", ""});
  EXPECT_TRUE(t);
  return *t;
}

const std::string weather_tool =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}})";
const std::string time_tool = R"({"type": "function", "function": {"name": "get_time"}})";
const std::string ask = R"("messages": [{"role": "user", "content": "Weather in Paris?"}])";

std::variant<completion_body, body_error> parse(const std::string& fields,
                                                std::string_view parser = "hermes") {
  const std::string body = "{" + ask + (fields.empty() ? "" : ", " + fields) + "}";
  return parse_chat_body(body, completion_defaults{}, showing_template(), 16, parser);
}

completion_body parse_ok(const std::string& fields, std::string_view parser = "hermes") {
  auto r = parse(fields, parser);
  if (auto* e = std::get_if<body_error>(&r)) {
    ADD_FAILURE() << fields << " -> " << e->param << ": " << e->message;
    return {};
  }
  return std::get<completion_body>(std::move(r));
}

body_error parse_error(const std::string& fields, std::string_view parser = "hermes") {
  auto r = parse(fields, parser);
  if (!std::holds_alternative<body_error>(r)) {
    ADD_FAILURE() << fields << " was accepted";
    return {};
  }
  return std::get<body_error>(r);
}

// -- fields ----------------------------------------------------------------------------------

TEST(tool_calls, bad_tools_and_tool_choice_are_refused_naming_the_field) {
  struct bad_case {
    std::string fields;
    const char* param;
  };
  const bad_case cases[] = {
      {R"("tools": {"type": "function"})", "tools"},
      {R"("tools": [5])", "tools[0]"},
      {R"("tools": [{"type": "retrieval"}])", "tools[0].type"},
      {R"("tools": [{"type": "function"}])", "tools[0].function"},
      {R"("tools": [{"type": "function", "function": {"name": 1}}])", "tools[0].function.name"},
      {R"("tools": [)" + weather_tool + R"(, {"type": "function", "function": {"name": "a b"}}])",
       "tools[1].function.name"},
      {R"("tools": [{"type": "function", "function": {"name": ")" + std::string(65, 'x') +
           R"("}}])",
       "tools[0].function.name"},
      {R"("tools": [)" + weather_tool + ", " + weather_tool + "]", "tools[1].function.name"},
      {R"("tools": [{"type": "function", "function": {"name": "f", "description": 1}}])",
       "tools[0].function.description"},
      {R"("tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])",
       "tools[0].function.parameters"},
      {R"("tool_choice": "required")", "tool_choice"},
      {R"("tool_choice": "auto")", "tool_choice"},
      {R"("tools": [], "tool_choice": {"type": "function", "function": {"name": "f"}})",
       "tool_choice"},
      {R"("tools": [)" + weather_tool + R"(], "tool_choice": "always")", "tool_choice"},
      {R"("tools": [)" + weather_tool + R"(], "tool_choice": 1)", "tool_choice"},
      {R"("tools": [)" + weather_tool +
           R"(], "tool_choice": {"type": "function", "function": {"name": "get_time"}})",
       "tool_choice"},
      {R"("tools": [)" + weather_tool + R"(], "tool_choice": {"type": "other"})",
       "tool_choice.type"},
      {R"("tools": [)" + weather_tool + R"(], "tool_choice": {"type": "function"})",
       "tool_choice.function.name"},
      {R"("tools": [)" + weather_tool + R"(], "parallel_tool_calls": "no")", "parallel_tool_calls"},
      {R"("tools": [)" + weather_tool +
           R"(], "tool_choice": "required", "response_format": {"type": "json_object"})",
       "tool_choice"},
      {R"("functions": [{"name": "f"}])", "functions"},
  };
  for (const auto& c : cases) EXPECT_EQ(parse_error(c.fields).param, c.param) << c.fields;
  EXPECT_EQ(parse_error(R"("tools": [)" + weather_tool +
                        R"(], "tool_choice": {"type": "function", "function": {"name": "f"}})")
                .message,
            "'tool_choice' names the function \"f\", which is not in 'tools'");
}

TEST(tool_calls, auto_needs_a_parser_of_the_models_calls) {
  const auto e = parse_error(R"("tools": [)" + weather_tool + "]", "");
  EXPECT_EQ(e.param, "tools");
  EXPECT_NE(e.message.find("set model.tool_call_parser"), std::string::npos) << e.message;
  EXPECT_EQ(parse_error(R"("tools": [)" + weather_tool + R"(], "tool_choice": "auto")", "").param,
            "tool_choice");
  // Forced calls and "none" need no parser.
  parse_ok(R"("tools": [)" + weather_tool + R"(], "tool_choice": "required")", "");
  parse_ok(R"("tools": [)" + weather_tool + R"(], "tool_choice": "none")", "");
  auto b = parse_ok(R"("tools": [)" + weather_tool + "]", "llama3_json");
  EXPECT_EQ(b.tool_calls.type, tool_call_reading::mode::parsed);
  EXPECT_EQ(b.tool_calls.parser, "llama3_json");
  EXPECT_FALSE(b.requests[0].params.constraint.active());
}

TEST(tool_calls, the_template_sees_the_tools_as_given_and_the_messages_with_their_tool_keys) {
  auto b = parse_ok(R"("tools": [)" + weather_tool + ", " + time_tool + R"(],
      "messages": [{"role": "user", "content": "Weather?"},
                   {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
                    "type": "function", "function": {"name": "get_weather",
                    "arguments": "{\"city\": \"Paris\", \"a\": 1.50}"}}]},
                   {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
                    "content": "sunny"},
                   {"role": "assistant", "tool_calls": []  , "content": "Sunny."}])");
  ASSERT_EQ(b.requests.size(), 1u);
  EXPECT_EQ(
      b.requests[0].prompt,
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather.", )"
      R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}}, )"
      R"("required": ["city"]}}}, {"type": "function", "function": {"name": "get_time"}}])"
      "\n"
      R"({"role": "user", "content": "Weather?"})"
      "\n"
      R"({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": )"
      R"("function", "function": {"name": "get_weather", "arguments": {"city": "Paris", )"
      R"("a": 1.5}}}]})"
      "\n"
      R"({"role": "tool", "content": "sunny", "tool_call_id": "call_1", "name": "get_weather"})"
      "\n"
      R"({"role": "assistant", "content": "Sunny."})"
      "\n");
  EXPECT_EQ(b.tool_calls.type, tool_call_reading::mode::parsed);
  // tool_choice "none": the template sees no tools and the answer is text.
  auto none = parse_ok(R"("tools": [)" + weather_tool + R"(], "tool_choice": "none")");
  EXPECT_EQ(none.requests[0].prompt.substr(0, 5), "null\n");
  EXPECT_EQ(none.tool_calls.type, tool_call_reading::mode::none);
}

TEST(tool_calls, bad_tool_messages_are_refused_naming_the_field) {
  struct bad_case {
    const char* messages;
    const char* param;
  };
  const bad_case cases[] = {
      {R"([{"role": "assistant", "content": null}])", "messages[0].content"},
      {R"([{"role": "assistant", "tool_calls": {}}])", "messages[0].tool_calls"},
      {R"([{"role": "assistant", "tool_calls": [{"type": "function"}]}])",
       "messages[0].tool_calls[0].function"},
      {R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}])",
       "messages[0].tool_calls[0].function.arguments"},
      {R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}])",
       "messages[0].tool_calls[0].function.arguments"},
      {R"([{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"function":
           {"name": "f", "arguments": "{\"a\": "}}]}])",
       "messages[1].tool_calls[0].function.arguments"},
      {R"([{"role": "tool", "tool_call_id": 5, "content": "x"}])", "messages[0].tool_call_id"},
      {R"([{"role": "tool", "tool_call_id": "c", "name": 1, "content": "x"}])", "messages[0].name"},
      {R"([{"role": "tool", "tool_call_id": "c"}])", "messages[0].content"},
  };
  for (const auto& c : cases) {
    const std::string body = std::string{R"({"messages": )"} + c.messages + "}";
    auto r = parse_chat_body(body, completion_defaults{}, showing_template(), 16, "hermes");
    ASSERT_TRUE(std::holds_alternative<body_error>(r)) << body;
    EXPECT_EQ(std::get<body_error>(r).param, c.param) << body;
  }
}

TEST(tool_calls, conversations_with_tools_take_the_tool_template_where_there_is_one) {
  auto plain = chat::chat_template::parse("plain", {"", ""});
  auto tools = chat::chat_template::parse("tools {{ tools | length }}", {"", ""});
  const std::string with_tools = "{" + ask + R"(, "tools": [)" + weather_tool + "]}";
  const std::string without = "{" + ask + "}";
  const std::string none =
      "{" + ask + R"(, "tools": [)" + weather_tool + R"(], "tool_choice": "none"})";
  auto prompt = [](const std::variant<completion_body, body_error>& r) {
    if (auto* e = std::get_if<body_error>(&r)) return "error " + e->param + ": " + e->message;
    return std::get<completion_body>(r).requests[0].prompt;
  };
  const chat_templates both{&*plain, &*tools, "refused"};
  EXPECT_EQ(prompt(parse_chat_body(with_tools, {}, both, 16, "hermes")), "tools 1");
  EXPECT_EQ(prompt(parse_chat_body(without, {}, both, 16, "hermes")), "plain");
  EXPECT_EQ(prompt(parse_chat_body(none, {}, both, 16, "hermes")), "plain");
  const chat_templates tools_only{nullptr, &*tools, "no default template"};
  EXPECT_EQ(prompt(parse_chat_body(with_tools, {}, tools_only, 16, "hermes")), "tools 1");
  EXPECT_EQ(prompt(parse_chat_body(without, {}, tools_only, 16, "hermes")),
            "error : no default template");
  const chat_templates plain_only{&*plain, nullptr, {}};
  EXPECT_EQ(prompt(parse_chat_body(with_tools, {}, plain_only, 16, "hermes")), "plain");
}

// -- schemas ---------------------------------------------------------------------------------

TEST(tool_calls, a_named_function_constrains_the_output_to_its_parameters) {
  auto b =
      parse_ok(R"("tools": [)" + weather_tool + ", " + time_tool +
               R"(], "tool_choice": {"type": "function", "function": {"name": "get_weather"}})");
  EXPECT_EQ(b.tool_calls.type, tool_call_reading::mode::named);
  EXPECT_EQ(b.tool_calls.function, "get_weather");
  const auto& c = b.requests[0].params.constraint;
  EXPECT_EQ(c.type, sampling::structured_output::kind::json_schema);
  EXPECT_EQ(c.field, "tool_choice");
  EXPECT_EQ(c.text,
            R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
  // A function without parameters takes an empty object.
  auto t = parse_ok(R"("tools": [)" + time_tool +
                    R"(], "tool_choice": {"type": "function", "function": {"name": "get_time"}})");
  EXPECT_EQ(t.requests[0].params.constraint.text, R"({"type":"object","properties":{}})");
}

TEST(tool_calls, required_constrains_the_output_to_an_array_of_calls_as_vllm_does) {
  auto b = parse_ok(R"("tools": [)" + weather_tool + ", " + time_tool +
                    R"(], "tool_choice": "required", "n": 2)");
  EXPECT_EQ(b.tool_calls.type, tool_call_reading::mode::required);
  ASSERT_EQ(b.requests.size(), 2u);
  EXPECT_EQ(b.requests[1].params.constraint.text, b.requests[0].params.constraint.text);
  EXPECT_EQ(ojson::parse(b.requests[0].params.constraint.text), ojson::parse(R"({
      "type": "array", "minItems": 1, "items": {"type": "object", "anyOf": [
        {"properties": {"name": {"type": "string", "enum": ["get_weather"]},
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                       "required": ["city"]}},
         "required": ["name", "parameters"]},
        {"properties": {"name": {"type": "string", "enum": ["get_time"]},
                        "parameters": {"type": "object", "properties": {}}},
         "required": ["name", "parameters"]}]}})"));
  auto single = parse_ok(R"("tools": [)" + weather_tool +
                         R"(], "tool_choice": "required", "parallel_tool_calls": false)");
  EXPECT_EQ(ojson::parse(single.requests[0].params.constraint.text)["maxItems"], 1);
}

TEST(tool_calls, required_moves_each_functions_defs_to_the_root) {
  std::vector<detail::function_tool> tools{
      {"a", ojson::parse(R"({"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}},
                             "$defs": {"P": {"type": "integer"}}})")},
      {"b", ojson::parse(R"({"type": "object", "$defs": {"P": {"type": "integer"},
                                                           "Q": {"type": "string"}}})")}};
  const auto schema = ojson::parse(detail::required_tools_schema(tools, true));
  EXPECT_EQ(schema["$defs"],
            ojson::parse(R"({"P": {"type": "integer"}, "Q": {"type": "string"}})"));
  EXPECT_FALSE(schema["items"]["anyOf"][0]["properties"]["parameters"].contains("$defs"));
  tools[1].parameters["$defs"]["P"] = ojson::parse(R"({"type": "string"})");
  try {
    detail::required_tools_schema(tools, true);
    ADD_FAILURE() << "conflicting $defs were accepted";
  } catch (const detail::field_error& e) {
    EXPECT_EQ(e.param, "tools");
  }
  EXPECT_EQ(
      detail::named_tool_schema(tools[0]),
      R"({"type":"object","properties":{"p":{"$ref":"#/$defs/P"}},"$defs":{"P":{"type":"integer"}}})");
}

// -- readers of forced answers -----------------------------------------------------------------

using conveyor::test::answer;

answer read(const tool_call_reading& reading, const std::vector<std::string>& pieces) {
  auto reader = detail::make_tool_call_reader(reading);
  chat::parsed_tool_output out;
  std::vector<chat::tool_call_event> events;
  for (const auto& p : pieces) reader->feed(p, events);
  reader->finish(events);
  out.add(events);
  answer a{out.content, {}};
  for (const auto& c : out.calls) a.calls.emplace_back(c.name, c.arguments);
  return a;
}

void expect_split_invariant(const tool_call_reading& reading, const std::string& text) {
  const auto whole = read(reading, {text});
  for (std::size_t cut = 0; cut <= text.size(); ++cut)
    EXPECT_EQ(read(reading, {text.substr(0, cut), text.substr(cut)}), whole) << cut << ": " << text;
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  EXPECT_EQ(read(reading, bytes), whole) << text;
}

tool_call_reading required() {
  return {tool_call_reading::mode::required, {}, {}};
}

TEST(tool_calls, required_answers_are_read_into_calls_with_their_arguments_as_written) {
  using calls = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(read(required(), {R"([{"name": "get_weather", "parameters": {"city": "Paris"}}])"}),
            (answer{"", calls{{"get_weather", R"({"city": "Paris"})"}}}));
  EXPECT_EQ(read(required(), {R"([{"name": "a", "parameters": {"x": [1, {"y": "}]"}]}}, )"
                              R"({"name": "b\"c", "parameters": {}}])"}),
            (answer{"", calls{{"a", R"({"x": [1, {"y": "}]"}]})"}, {"b\"c", "{}"}}}));
  // Parameters before the name, a scalar, a call without parameters.
  EXPECT_EQ(read(required(), {R"([{"parameters": {"k": 1}, "name": "a"}, {"name": "b", )"
                              R"("parameters": 12}, {"name": "c"}])"}),
            (answer{"", calls{{"a", R"({"k": 1})"}, {"b", "12"}, {"c", "{}"}}}));
  // Nothing read as a call: the text is the content.
  EXPECT_EQ(read(required(), {"no calls here"}), (answer{"no calls here", {}}));
  EXPECT_EQ(read(required(), {""}), (answer{"", {}}));
}

TEST(tool_calls, forced_answers_read_alike_at_every_split_point) {
  for (const std::string text :
       {R"([{"name": "get_weather", "parameters": {"city": "Zürich", "n": [1, 2.5]}}, )"
        R"({"name": "search", "parameters": {"q": "a\"}]{", "e": "\\"}}])",
        R"([{"parameters": {"k": 1}, "name": "a"}, {"name": "b", "parameters": 12}])",
        R"([{"name": "a", "parameters": {"x": )", "garbage"})
    expect_split_invariant(required(), text);
  const tool_call_reading named{tool_call_reading::mode::named, "f", {}};
  EXPECT_EQ(read(named, {R"({"a": )", R"(1})"}), (answer{"", {{"f", R"({"a": 1})"}}}));
  EXPECT_EQ(read(named, {""}), (answer{"", {}}));
  expect_split_invariant(named, R"({"city": "Paris", "when": ["now"]})");
}

// -- answers ---------------------------------------------------------------------------------

completion_meta chat_meta() {
  completion_meta m;
  m.id = "chatcmpl-x";
  m.created = 7;
  m.model = "m";
  m.kind = api_kind::chat_completions;
  return m;
}

// A chat task with one choice reading its text as `reading`, fed `pieces` then finished.
struct played {
  std::vector<json> events;  // stream chunks (without [DONE])
  json body;                 // the whole answer
};

played play(const tool_call_reading& reading, bool stream, const std::vector<std::string>& pieces,
            const std::string& finish = "stop") {
  completion_task task{1, chat_meta(), stream, false, 1};
  task.read_tool_calls(reading);
  played p;
  auto take = [&](const step_result& r) {
    for (const auto& e : r.events)
      if (e != "[DONE]") p.events.push_back(json::parse(e));
    if (r.finished && !stream) p.body = json::parse(r.body);
  };
  for (const auto& piece : pieces) take(send_text(task, 0, piece));
  take(send_finish(task, 0, finish, {5, 7, 0}));
  return p;
}

// The message a client assembles from a stream's deltas, as the openai package does.
json assemble(const std::vector<json>& chunks, std::string& finish_reason) {
  json message{{"content", ""}};
  json calls = json::array();
  for (const auto& c : chunks) {
    const auto& choice = c["choices"][0];
    if (!choice["finish_reason"].is_null()) finish_reason = choice["finish_reason"];
    const auto& delta = choice["delta"];
    if (delta.contains("content"))
      message["content"] =
          message["content"].get<std::string>() + delta["content"].get<std::string>();
    if (!delta.contains("tool_calls")) continue;
    for (const auto& d : delta["tool_calls"]) {
      const std::size_t i = d["index"];
      if (i == calls.size()) {
        EXPECT_TRUE(d.contains("id") && d.contains("type")) << d.dump();
        EXPECT_EQ(d["function"]["name"].is_string(), true) << d.dump();
        calls.push_back(json{{"id", d["id"]},
                             {"type", d["type"]},
                             {"function", {{"name", d["function"]["name"]}, {"arguments", ""}}}});
      } else {
        EXPECT_FALSE(d.contains("id")) << "only a call's first delta has its id";
        EXPECT_FALSE(d["function"].contains("name"));
      }
      auto& args = calls[i]["function"]["arguments"];
      args = args.get<std::string>() + d["function"]["arguments"].get<std::string>();
    }
  }
  if (!calls.empty()) message["tool_calls"] = calls;
  return message;
}

// The whole answer's message with its ids taken out (they are random), and the same of a
// stream's assembled message (null content as "").
json comparable(json message) {
  if (message.contains("tool_calls"))
    for (auto& c : message["tool_calls"]) {
      EXPECT_EQ(c["id"].get<std::string>().rfind("call_", 0), 0u);
      EXPECT_EQ(c["id"].get<std::string>().size(), 29u);
      c.erase("id");
    }
  if (message["content"].is_null()) message["content"] = "";
  message.erase("role");
  return message;
}

TEST(tool_calls, a_named_functions_answer_is_one_call_whole_and_streamed) {
  const tool_call_reading named{tool_call_reading::mode::named, "get_weather", {}};
  auto whole = play(named, false, {R"({"city": )", R"("Paris"})"});
  const auto& choice = whole.body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const auto& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"],
            (json{{"name", "get_weather"}, {"arguments", R"({"city": "Paris"})"}}));

  auto streamed = play(named, true, {R"({"city": )", R"("Paris"})"});
  // The role, a call's first delta (id, type, name, arguments), the next piece, the end.
  ASSERT_EQ(streamed.events.size(), 4u);
  const auto& first = streamed.events[1]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(first["index"], 0);
  EXPECT_EQ(first["type"], "function");
  EXPECT_EQ(first["function"]["name"], "get_weather");
  EXPECT_EQ(first["function"]["arguments"], R"({"city": )");
  EXPECT_EQ(streamed.events[2]["choices"][0]["delta"],
            (json{{"tool_calls", {{{"index", 0}, {"function", {{"arguments", R"("Paris"})"}}}}}}}));
  EXPECT_EQ(streamed.events[3]["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(streamed.events[3]["choices"][0]["delta"], json::object());
  std::string finish;
  EXPECT_EQ(comparable(assemble(streamed.events, finish)), comparable(choice["message"]));
  EXPECT_EQ(finish, "tool_calls");
}

TEST(tool_calls, a_forced_answer_cut_at_its_length_keeps_its_cut_call_whole_and_streamed) {
  const tool_call_reading named{tool_call_reading::mode::named, "get_weather", {}};
  auto whole = play(named, false, {R"({"city": "Pa)"}, "length");
  const auto& choice = whole.body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "length");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << choice;
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], R"({"city": "Pa)");
  // Streamed, the pieces went out as they came; the last chunk says "length"; the two agree.
  auto streamed = play(named, true, {R"({"city": "Pa)"}, "length");
  EXPECT_EQ(streamed.events.back()["choices"][0]["finish_reason"], "length");
  std::string finish;
  EXPECT_EQ(comparable(assemble(streamed.events, finish)), comparable(choice["message"]));
  EXPECT_EQ(finish, "length");
  auto required_cut =
      play(required(), false, {R"([{"name": "get_weather", "parameters": {"city": "Pa)"}, "length");
  auto required_streamed =
      play(required(), true, {R"([{"name": "get_weather", "parameters": {"city": "Pa)"}, "length");
  EXPECT_EQ(required_cut.body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(comparable(assemble(required_streamed.events, finish)),
            comparable(required_cut.body["choices"][0]["message"]));
}

TEST(tool_calls, streamed_answers_equal_whole_ones_however_the_text_comes) {
  const tool_call_reading hermes{tool_call_reading::mode::parsed, {}, "hermes"};
  const tool_call_reading named{tool_call_reading::mode::named, "f", {}};
  const std::pair<tool_call_reading, std::string> cases[] = {
      {required(), R"([{"name": "get_weather", "parameters": {"city": "Zürich"}}, )"
                   R"({"name": "get_time", "parameters": {}}])"},
      {named, R"({"q": "a \"quoted\" word", "n": [1, 2]})"},
      {hermes,
       "I will look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
       "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
       "\"arguments\": {}}\n</tool_call>"},
      {hermes, "No tools needed: 4 < 5."},
  };
  for (const auto& [reading, text] : cases) {
    const auto whole = play(reading, false, {text});
    const auto& choice = whole.body["choices"][0];
    for (std::size_t cut = 0; cut <= text.size(); ++cut) {
      // The backend's text is whole UTF-8 at every step.
      if (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) continue;
      auto streamed = play(reading, true, {text.substr(0, cut), text.substr(cut)});
      std::string finish;
      EXPECT_EQ(comparable(assemble(streamed.events, finish)), comparable(choice["message"]))
          << text << " cut at " << cut;
      EXPECT_EQ(finish, choice["finish_reason"]);
    }
  }
  // Auto: text before the calls is the content; without calls the answer is plain.
  auto called = play(hermes, false, {std::get<1>(cases[2])});
  EXPECT_EQ(called.body["choices"][0]["message"]["content"], "I will look.\n");
  EXPECT_EQ(called.body["choices"][0]["message"]["tool_calls"].size(), 2u);
  EXPECT_EQ(called.body["choices"][0]["finish_reason"], "tool_calls");
  auto plain = play(hermes, false, {std::get<1>(cases[3])});
  EXPECT_EQ(plain.body["choices"][0]["message"],
            (json{{"role", "assistant"}, {"content", "No tools needed: 4 < 5."}}));
  EXPECT_EQ(plain.body["choices"][0]["finish_reason"], "stop");
}

}  // namespace
}  // namespace conveyor::server::test
