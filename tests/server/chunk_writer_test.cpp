// The stream chunks written without JSON objects (server/chunk_writer.hpp) against nlohmann::json:
// byte for byte what dumping the same nlohmann::json object gives, and the same fields and
// values when nlohmann::json parses them back.
#include "server/chunk_writer.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "task_steps.hpp"

#include "server/completion_task.hpp"
#include "server/openai.hpp"

namespace conveyor::server {

namespace {

using json = nlohmann::json;

// How the server dumps the JSON objects it builds (whole answers, errors, log-probabilities).
std::string nl_dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The reference: each chunk as an nlohmann::json object.
json meta_object(const completion_meta& meta) {
  return json{{"id", meta.id},
              {"object", meta.kind == api_kind::chat_completions ? "chat.completion.chunk"
                                                                 : "text_completion"},
              {"created", meta.created},
              {"model", meta.model}};
}

std::string reference_chunk(const completion_meta& meta, std::size_t index, const std::string& text,
                            std::optional<std::string> finish_reason, json logprobs = nullptr) {
  json obj = meta_object(meta);
  json choice;
  if (meta.kind == api_kind::chat_completions)
    choice =
        json{{"index", index},
             {"delta", text.empty() && finish_reason ? json::object() : json{{"content", text}}},
             {"logprobs", logprobs},
             {"finish_reason", nullptr}};
  else
    choice =
        json{{"text", text}, {"index", index}, {"logprobs", logprobs}, {"finish_reason", nullptr}};
  if (finish_reason) choice["finish_reason"] = *finish_reason;
  obj["choices"] = json::array({std::move(choice)});
  return nl_dump(obj);
}

// Texts a token can carry: quotes, backslashes, every control character, DEL, non-ASCII UTF-8
// of 2, 3 and 4 bytes, and broken UTF-8 of every kind (incomplete at the end, cut in the middle,
// stray continuation bytes, overlong forms, surrogates, bytes above U+10FFFF).
std::vector<std::string> tricky_texts() {
  std::vector<std::string> texts = {
      "",
      "hello",
      "say \"hi\"",
      "back\\slash \\\" both",
      "tab\there\nnewline\r\n\b\f",
      std::string("nul\0byte", 8),
      "\x7f del",
      "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 end",
      "\xe6\x97",              // incomplete 3-byte character at the end
      "ab\xf0\x9f\x98",        // incomplete 4-byte character at the end
      "\xc3",                  // a lone lead byte
      "\xe2\x28\xa1",          // a 3-byte character cut by an ASCII byte
      "\x80\xbf x",            // stray continuation bytes
      "\xc0\xaf \xc1\xbf",     // overlong forms
      "\xe0\x80\xaf",          // overlong 3-byte
      "\xed\xa0\x80 \xed\x9f\xbf",  // a surrogate, then the last code point before them
      "\xf4\x90\x80\x80 \xf4\x8f\xbf\xbf",  // above U+10FFFF, then U+10FFFF
      "\xf5\x80 \xff\xfe",     // bytes that never start a character
      "\xf0\x9f\xc3\xa9",      // a 4-byte start cut by a valid 2-byte character
  };
  std::string controls;
  for (int c = 0; c < 0x20; ++c) controls += char(c);
  texts.push_back(controls);
  return texts;
}

std::vector<completion_meta> metas() {
  return {completion_meta{"cmpl-0123456789abcdef01234567", 1700000000, "stories260K",
                          api_kind::completions},
          completion_meta{"chatcmpl-x", 5, "a \"quoted\" model/\xc3\xa9", api_kind::chat_completions}};
}

// One chunk from the chunk writer.
std::string chunk(const completion_meta& meta, std::size_t index, std::string_view text,
                  std::optional<std::string_view> finish_reason,
                  const logprobs_part* logprobs = nullptr) {
  std::string out;
  detail::chunk_writer{meta}.append_chunk(out, index, text, finish_reason, logprobs);
  return out;
}

void expect_same(const std::string& ours, const std::string& reference, const std::string& what) {
  EXPECT_EQ(ours, reference) << what;
  // nlohmann::json reads it back to the same fields and values.
  json parsed;
  ASSERT_NO_THROW(parsed = json::parse(ours)) << what;
  EXPECT_EQ(parsed, json::parse(reference)) << what;
}

}  // namespace

TEST(server_chunk_writer, strings_escape_as_nlohmann_json_does) {
  for (const auto& text : tricky_texts()) {
    std::string ours;
    detail::append_json_string(ours, text);
    expect_same(ours, nl_dump(json(text)), json(text).dump(-1, ' ', true, json::error_handler_t::replace));
  }
}

TEST(server_chunk_writer, strings_of_random_bytes_escape_as_nlohmann_json_does) {
  // Random byte strings biased to the bytes UTF-8 decoding cares about: a fixed seed, so a
  // failure repeats.
  std::mt19937 rng{15};
  const unsigned char interesting[] = {0x00, 0x1f, '"',  '\\', 'a',  0x7f, 0x80, 0x8f, 0x90, 0x9f,
                                       0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed,
                                       0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff};
  for (int round = 0; round < 20000; ++round) {
    std::string text;
    const int n = int(rng() % 8);
    for (int i = 0; i < n; ++i)
      text += rng() % 4 == 0 ? char(rng() & 0xff) : char(interesting[rng() % sizeof(interesting)]);
    std::string ours;
    detail::append_json_string(ours, text);
    ASSERT_EQ(ours, nl_dump(json(text)))
        << "bytes: " << json(text).dump(-1, ' ', true, json::error_handler_t::replace);
  }
}

TEST(server_chunk_writer, chunks_are_byte_for_byte_the_json_objects) {
  for (const auto& meta : metas()) {
    for (const auto& text : tricky_texts()) {
      for (std::size_t index : {std::size_t{0}, std::size_t{3}}) {
        expect_same(chunk(meta, index, text, std::nullopt),
                    reference_chunk(meta, index, text, std::nullopt), "running: " + text);
        expect_same(chunk(meta, index, text, std::string_view{"stop"}),
                    reference_chunk(meta, index, text, std::string{"stop"}), "last: " + text);
      }
    }
    expect_same(chunk(meta, 1, "", std::string_view{"length"}),
                reference_chunk(meta, 1, "", std::string{"length"}), "empty last");
  }
}

TEST(server_chunk_writer, chunks_with_logprobs_are_byte_for_byte_the_json_objects) {
  // Log-probabilities of a chunk's tokens: a token with alternatives, one that top_k excluded
  // (-infinity, written as vLLM does) and one whose text needs escaping.
  logprobs_part part;
  part.tokens = {{"Hi", -0.5f, {{"Hi", -0.5f}, {"Oh", -2.0f}}},
                 {" \"q\"", -std::numeric_limits<float>::infinity(), {}}};
  part.text_offsets = {0, 2};
  const json completions = json::parse(R"({"tokens": ["Hi", " \"q\""],
    "token_logprobs": [-0.5, -9999.0], "top_logprobs": [{"Hi": -0.5, "Oh": -2.0},
    {" \"q\"": -9999.0}], "text_offset": [0, 2]})");
  const json chat = json::parse(R"({"content": [
    {"token": "Hi", "logprob": -0.5, "bytes": [72, 105], "top_logprobs": [
      {"token": "Hi", "logprob": -0.5, "bytes": [72, 105]},
      {"token": "Oh", "logprob": -2.0, "bytes": [79, 104]}]},
    {"token": " \"q\"", "logprob": -9999.0, "bytes": [32, 34, 113, 34], "top_logprobs": []}]})");
  for (const auto& meta : metas()) {
    const json& logprobs = meta.kind == api_kind::chat_completions ? chat : completions;
    expect_same(chunk(meta, 1, "Hi \"q\"", std::nullopt, &part),
                reference_chunk(meta, 1, "Hi \"q\"", std::nullopt, logprobs), "running");
    expect_same(chunk(meta, 0, "", std::string_view{"stop"}, &part),
                reference_chunk(meta, 0, "", std::string{"stop"}, logprobs), "last");
    // No tokens: a null `logprobs`, as without any.
    logprobs_part none;
    expect_same(chunk(meta, 0, "x", std::nullopt, &none),
                reference_chunk(meta, 0, "x", std::nullopt), "empty");
  }
}

TEST(server_chunk_writer, role_and_usage_chunks_are_byte_for_byte_the_json_objects) {
  for (const auto& meta : metas()) {
    const detail::chunk_writer writer{meta};
    json role = meta_object(meta);
    role["choices"] = json::array({json{{"index", 2},
                                        {"delta", {{"role", "assistant"}, {"content", ""}}},
                                        {"logprobs", nullptr},
                                        {"finish_reason", nullptr}}});
    std::string out;
    writer.append_role_chunk(out, 2);
    expect_same(out, nl_dump(role), "role");
    // The usage as the whole answer renders it (server/openai.cpp), 5 of the 7 prompt tokens
    // read from the prefix cache; then none.
    for (int32_t cached : {5, 0}) {
      json usage = meta_object(meta);
      usage["choices"] = json::array();
      usage["usage"] = json{{"prompt_tokens", 7},
                            {"completion_tokens", 123},
                            {"total_tokens", 130},
                            {"prompt_tokens_details", {{"cached_tokens", cached}}}};
      out.clear();
      writer.append_usage_chunk(out, {7, 123, cached});
      expect_same(out, nl_dump(usage), "usage");
    }
  }
}

TEST(server_chunk_writer, tool_call_chunks_are_byte_for_byte_the_json_objects) {
  completion_meta meta;
  meta.id = "chatcmpl-\"q\"";
  meta.created = 9;
  meta.model = "m\xff";
  meta.kind = api_kind::chat_completions;
  const detail::chunk_writer writer{meta};
  for (const std::string args : {"", "{\"city\": \"Zürich\"}", "\x01\xc3"}) {
    json first = meta_object(meta);
    first["choices"] = json::array({json{
        {"index", 1},
        {"delta",
         {{"tool_calls",
           json::array({json{{"index", 3},
                             {"id", "call_1"},
                             {"type", "function"},
                             {"function", {{"name", "get_weather"}, {"arguments", args}}}}})}}},
        {"logprobs", nullptr},
        {"finish_reason", nullptr}}});
    std::string out;
    writer.append_tool_call_chunk(out, 1, 3, "call_1", "get_weather", args);
    expect_same(out, nl_dump(first), "first");
    json next = meta_object(meta);
    next["choices"] = json::array({json{
        {"index", 1},
        {"delta",
         {{"tool_calls", json::array({json{{"index", 3}, {"function", {{"arguments", args}}}}})}}},
        {"logprobs", nullptr},
        {"finish_reason", nullptr}}});
    out.clear();
    writer.append_tool_call_chunk(out, 1, 3, "", "", args);
    expect_same(out, nl_dump(next), "next");
  }
}

TEST(server_chunk_writer, a_tasks_stream_events_are_byte_for_byte_the_json_objects) {
  // A task renders its chunks with the tail of its meta rendered once: the same bytes.
  for (const auto& meta : metas()) {
    detail::completion_task task{1, meta, true, false, 1};
    for (const auto& text : tricky_texts()) {
      if (text.empty()) continue;  // empty text sends nothing
      auto out = test::send_text(task, 0, text);
      ASSERT_FALSE(out.events.empty());
      expect_same(out.events.back(), reference_chunk(meta, 0, text, std::nullopt), text);
    }
    auto end = test::send_finish(task, 0, "length", {3, 4});
    ASSERT_EQ(end.events.size(), 2u);
    expect_same(end.events[0], reference_chunk(meta, 0, "", std::string{"length"}), "finish");
    EXPECT_EQ(end.events[1], "[DONE]");
  }
}

TEST(server_chunk_writer, appends_after_what_the_buffer_holds) {
  const auto meta = metas()[0];
  const detail::chunk_writer writer{meta};
  std::string out = "data: ";
  writer.append_chunk(out, 0, "a", std::nullopt);
  out += "\n\ndata: ";
  writer.append_chunk(out, 0, "b", std::nullopt);
  EXPECT_EQ(out, "data: " + reference_chunk(meta, 0, "a", std::nullopt) + "\n\ndata: " +
                     reference_chunk(meta, 0, "b", std::nullopt));
}

}  // namespace conveyor::server
