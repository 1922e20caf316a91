// The stream chunks written without JSON objects (server/chunk_writer.hpp) against nlohmann::json:
// byte for byte what the nlohmann renderer before them gave, and the same fields and values
// when nlohmann::json parses them back.
#include "server/chunk_writer.hpp"

#include <gtest/gtest.h>

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

// How the server dumped JSON before (and still does for other objects).
std::string nl_dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The reference: the nlohmann::json objects the renderer built per token before this file.
json meta_object(const completion_meta& meta) {
  return json{{"id", meta.id},
              {"object", meta.kind == api_kind::chat_completions ? "chat.completion.chunk"
                                                                 : "text_completion"},
              {"created", meta.created},
              {"model", meta.model}};
}

std::string reference_chunk(const completion_meta& meta, std::size_t index, const std::string& text,
                            std::optional<std::string> finish_reason) {
  json obj = meta_object(meta);
  json choice;
  if (meta.kind == api_kind::chat_completions)
    choice = json{{"index", index},
                  {"delta", text.empty() && finish_reason ? json::object()
                                                          : json{{"content", text}}},
                  {"logprobs", nullptr},
                  {"finish_reason", nullptr}};
  else
    choice = json{{"text", text}, {"index", index}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
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
        expect_same(render_chunk(meta, index, text, std::nullopt),
                    reference_chunk(meta, index, text, std::nullopt), "running: " + text);
        expect_same(render_chunk(meta, index, text, std::string_view{"stop"}),
                    reference_chunk(meta, index, text, std::string{"stop"}), "last: " + text);
      }
    }
    expect_same(render_chunk(meta, 1, "", std::string_view{"length"}),
                reference_chunk(meta, 1, "", std::string{"length"}), "empty last");
  }
}

TEST(server_chunk_writer, role_and_usage_chunks_are_byte_for_byte_the_json_objects) {
  for (const auto& meta : metas()) {
    json role = meta_object(meta);
    role["choices"] = json::array({json{{"index", 2},
                                        {"delta", {{"role", "assistant"}, {"content", ""}}},
                                        {"logprobs", nullptr},
                                        {"finish_reason", nullptr}}});
    expect_same(render_role_chunk(meta, 2), nl_dump(role), "role");
    json usage = meta_object(meta);
    usage["choices"] = json::array();
    usage["usage"] = json{{"prompt_tokens", 7}, {"completion_tokens", 123}, {"total_tokens", 130}};
    expect_same(render_usage_chunk(meta, {7, 123}), nl_dump(usage), "usage");
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
  std::string out = "data: ";
  append_chunk(out, meta, 0, "a", std::nullopt);
  out += "\n\ndata: ";
  append_chunk(out, meta, 0, "b", std::nullopt);
  EXPECT_EQ(out, "data: " + reference_chunk(meta, 0, "a", std::nullopt) + "\n\ndata: " +
                     reference_chunk(meta, 0, "b", std::nullopt));
}

}  // namespace conveyor::server
