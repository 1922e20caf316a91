// Output formats compiled by xgrammar against real vocabularies: random walks through the masks
// (any allowed token, seeded) give only outputs that a checker outside the engine accepts
// (std::regex, nlohmann-json with the schema's rules written out, the choice list); bad formats
// are refused naming their field; compilations past their limits are refused.
#include <future>
#include <random>
#include <regex>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "grammar/bounded_runner.hpp"
#include "grammar/choice.hpp"
#include "grammar/grammar_compiler.hpp"
#include "grammar/token_matcher.hpp"
#include "tests/support/model_files.hpp"

using namespace conveyor;
using namespace conveyor::grammar;
using kind = sampling::structured_output::kind;

namespace {

sampling::structured_output format(kind type, std::string text,
                                   std::vector<std::string> choices = {}) {
  sampling::structured_output c;
  c.type = type;
  c.text = std::move(text);
  c.choices = std::move(choices);
  c.field = "structured_outputs";
  return c;
}

class grammar_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = tokenizers::load_tokenizer(test::source_path("models/stories260K/tok512.model"));
    ASSERT_TRUE(tok) << message_of(tok.error());
    tokenizer = *tok;
    end_ids = {tokenizer->bos_id(), tokenizer->eos_id()};
    compiler = std::make_unique<grammar_compiler>(*tokenizer, tokenizer->vocab_size());
  }

  std::shared_ptr<const compiled_grammar> compile(const sampling::structured_output& c) {
    auto g = compiler->compile(c);
    EXPECT_TRUE(g) << message_of(g.error());
    return g ? *g : nullptr;
  }

  // One walk: each step picks uniformly among the tokens the mask allows (an end token only
  // where the format may end) until the format is finished or an end token is picked. Returns
  // the output's bytes and whether it ended properly.
  std::pair<std::string, bool> walk(const std::shared_ptr<const compiled_grammar>& g, uint64_t seed,
                                    int32_t max_tokens = 400) {
    token_matcher m{g, end_ids};
    std::mt19937_64 rng{seed};
    std::string out;
    const int32_t vocab = tokenizer->vocab_size();
    std::vector<float> row(std::size_t(vocab), 0.0f);
    for (int32_t i = 0; i < max_tokens; ++i) {
      m.update_mask();
      if (m.finished()) return {out, true};
      std::fill(row.begin(), row.end(), 0.0f);
      m.apply_mask(row.data(), vocab);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab; ++id) {
        EXPECT_EQ(row[std::size_t(id)] == 0.0f, m.allows(id)) << id;
        if (row[std::size_t(id)] == 0.0f) allowed.push_back(id);
      }
      if (allowed.empty()) return {out, false};
      const int32_t token = allowed[std::size_t(rng() % allowed.size())];
      EXPECT_TRUE(m.accept(token)) << token;
      if (token == end_ids[0] || token == end_ids[1]) return {out, true};
      out += tokenizer->token_bytes(token);
    }
    return {out, false};
  }

  std::shared_ptr<const tokenizers::tokenizer> tokenizer;
  std::vector<int32_t> end_ids;
  std::unique_ptr<grammar_compiler> compiler;
};

TEST_F(grammar_test, regex_walks_match_the_regex) {
  const std::string pattern = "[0-9]{3}-[a-z]{2,5}( (yes|no))?";
  auto g = compile(format(kind::regex, pattern));
  ASSERT_TRUE(g);
  const std::regex re{pattern};
  int finished = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    auto [text, ended] = walk(g, seed);
    ASSERT_TRUE(ended) << text;
    ++finished;
    EXPECT_TRUE(std::regex_match(text, re)) << "seed " << seed << ": '" << text << "'";
  }
  EXPECT_EQ(finished, 40);
}

TEST_F(grammar_test, choice_walks_give_one_of_the_choices_byte_for_byte) {
  // A control byte followed by hex digits, which an escape must not swallow.
  const std::vector<std::string> choices{
      "yes",        "no",          "say \"hi\"", "back\\slash",
      "two\nlines", "caf\xc3\xa9", "yes please", std::string{"x\x01"} + "42"};
  auto g = compile(format(kind::choice, "", choices));
  ASSERT_TRUE(g);
  std::set<std::string> seen;
  for (uint64_t seed = 0; seed < 60; ++seed) {
    auto [text, ended] = walk(g, seed);
    ASSERT_TRUE(ended);
    EXPECT_NE(std::find(choices.begin(), choices.end(), text), choices.end()) << text;
    seen.insert(text);
  }
  // The walks reach more than one choice (the mask is not stuck on one path).
  EXPECT_GE(seen.size(), 3u);
}

TEST_F(grammar_test, json_schema_walks_give_documents_that_fit_the_schema) {
  const auto schema = nlohmann::json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 6},
      "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "mood": {"enum": ["happy", "sad"]},
      "tags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}
    },
    "required": ["name", "age", "mood"],
    "additionalProperties": false})");
  auto g = compile(format(kind::json_schema, schema.dump()));
  ASSERT_TRUE(g);
  int complete = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    auto [text, ended] = walk(g, seed, 600);
    if (!ended) continue;  // a long string may run past the walk's length
    ++complete;
    auto doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded()) {
      std::string hex;
      for (unsigned char ch : text) hex += std::to_string(int(ch)) + " ";
      ADD_FAILURE() << text << " | " << hex;
      continue;
    }
    ASSERT_TRUE(doc.is_object()) << text;
    for (const char* key : {"name", "age", "mood"}) EXPECT_TRUE(doc.contains(key)) << text;
    for (const auto& item : doc.items())
      EXPECT_TRUE(schema["properties"].contains(item.key())) << text;
    EXPECT_TRUE(doc["name"].is_string());
    // maxLength counts characters.
    const auto name = doc["name"].get<std::string>();
    EXPECT_LE(std::count_if(name.begin(), name.end(), [](char ch) { return (ch & 0xc0) != 0x80; }),
              6)
        << text;
    ASSERT_TRUE(doc["age"].is_number_integer()) << text;
    EXPECT_GE(doc["age"].get<int64_t>(), 0);
    EXPECT_LE(doc["age"].get<int64_t>(), 120);
    EXPECT_TRUE(doc["mood"] == "happy" || doc["mood"] == "sad") << text;
    if (doc.contains("tags")) {
      ASSERT_TRUE(doc["tags"].is_array());
      EXPECT_LE(doc["tags"].size(), 3u);
      for (const auto& t : doc["tags"]) EXPECT_TRUE(t.is_boolean());
    }
    // Compact, as json.dumps writes: outside strings, a space only after ',' and ':'.
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const char ch = text[i];
      if (in_string) {
        if (ch == '\\')
          ++i;
        else if (ch == '"')
          in_string = false;
      } else if (ch == '"') {
        in_string = true;
      } else if (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r') {
        EXPECT_TRUE(ch == ' ' && i > 0 && (text[i - 1] == ',' || text[i - 1] == ':'))
            << "whitespace at " << i << " of " << text;
      }
    }
  }
  EXPECT_GE(complete, 20);
}

TEST_F(grammar_test, json_whitespace_is_bounded) {
  // A walk that always prefers whitespace where it is allowed never gets two in a row: the JSON
  // formats leave no room for whitespace runs, so a model that keeps choosing spaces cannot run
  // to max_tokens on them.
  auto g = compile(format(
      kind::json_schema,
      R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"]})"));
  ASSERT_TRUE(g);
  const auto space = tokenizer->encode(" ", false);
  ASSERT_TRUE(space);
  token_matcher m{g, end_ids};
  int32_t spaces_in_a_row = 0, most = 0;
  std::string out;
  for (int i = 0; i < 200; ++i) {
    m.update_mask();
    if (m.finished()) break;
    // Prefer any token made only of whitespace; else the first allowed one.
    int32_t pick = -1;
    for (int32_t id = 0; id < tokenizer->vocab_size() && pick < 0; ++id) {
      const auto b = tokenizer->token_bytes(id);
      if (m.allows(id) && !b.empty() && b.find_first_not_of(" \n\t") == std::string::npos)
        pick = id;
    }
    const bool ws = pick >= 0;
    for (int32_t id = 0; id < tokenizer->vocab_size() && pick < 0; ++id)
      if (m.allows(id) && id != end_ids[0] && id != end_ids[1]) pick = id;
    ASSERT_GE(pick, 0);
    ASSERT_TRUE(m.accept(pick));
    out += tokenizer->token_bytes(pick);
    spaces_in_a_row = ws ? spaces_in_a_row + 1 : 0;
    most = std::max(most, spaces_in_a_row);
  }
  EXPECT_LE(most, 1) << out;
}

TEST_F(grammar_test, a_finished_format_allows_only_the_end_tokens) {
  auto g = compile(format(kind::choice, "", {"abc"}));
  ASSERT_TRUE(g);
  token_matcher m{g, end_ids};
  // Spells "abc" one byte at a time (the vocabulary has a token for each letter).
  std::vector<int32_t> ids;
  for (char ch : std::string{"abc"})
    for (int32_t id = 0; id < tokenizer->vocab_size(); ++id)
      if (tokenizer->token_bytes(id) == std::string(1, ch)) {
        ids.push_back(id);
        break;
      }
  ASSERT_EQ(ids.size(), 3u);
  for (auto id : ids) {
    m.update_mask();
    EXPECT_FALSE(m.finished());
    ASSERT_TRUE(m.allows(id));
    ASSERT_TRUE(m.accept(id));
  }
  m.update_mask();
  EXPECT_TRUE(m.finished());
  for (int32_t id = 0; id < tokenizer->vocab_size(); ++id)
    EXPECT_EQ(m.allows(id), id == end_ids[0] || id == end_ids[1]) << id;
  // A token the mask forbids is refused and changes nothing.
  EXPECT_FALSE(m.accept(ids[0]));
  // Logits past the grammar's vocabulary are masked too.
  std::vector<float> row(std::size_t(tokenizer->vocab_size() + 3), 1.0f);
  m.apply_mask(row.data(), int32_t(row.size()));
  for (std::size_t i = std::size_t(tokenizer->vocab_size()); i < row.size(); ++i)
    EXPECT_TRUE(std::isinf(row[i]));
}

TEST_F(grammar_test, formats_the_engine_cannot_compile_are_refused_naming_the_field) {
  struct bad {
    sampling::structured_output format;
    std::string starts;
  };
  auto named = [](sampling::structured_output c, const char* field) {
    c.field = field;
    return c;
  };
  const bad cases[] = {
      {named(format(kind::json_schema, "{\"type\": \"object\", \"properties\": 5}"),
             "response_format"),
       "'response_format': the JSON schema cannot be compiled: "},
      {named(format(kind::json_schema, "not json"), "structured_outputs.json"),
       "'structured_outputs.json': the JSON schema cannot be compiled: "},
      {named(format(kind::regex, "[a-"), "structured_outputs.regex"),
       "'structured_outputs.regex': the regular expression cannot be compiled: "},
      {named(format(kind::grammar, "root ::= ("), "structured_outputs.grammar"),
       "'structured_outputs.grammar': the grammar cannot be compiled: "},
      {named(format(kind::grammar, "start ::= \"a\""), "structured_outputs.grammar"),
       "'structured_outputs.grammar': the grammar cannot be compiled: "},
      {named(format(kind::choice, ""), "structured_outputs.choice"),
       "'structured_outputs.choice': the choice list is empty"},
  };
  for (const auto& c : cases) {
    auto g = compiler->compile(c.format);
    ASSERT_FALSE(g) << c.format.text;
    EXPECT_EQ(code_of(g.error()), ec::bad_request);
    EXPECT_EQ(message_of(g.error()).rfind(c.starts, 0), 0u) << message_of(g.error());
    // The engine's own prefix (time, file, line) is not in the message.
    EXPECT_EQ(message_of(g.error()).find(".cc:"), std::string::npos) << message_of(g.error());
  }
}

TEST_F(grammar_test, formats_past_the_size_limits_are_refused) {
  compile_limits l;
  l.max_spec_bytes = 64;
  l.max_choices = 3;
  grammar_compiler small{*tokenizer, tokenizer->vocab_size(), l};
  auto g = small.compile(format(kind::regex, std::string(65, 'a')));
  ASSERT_FALSE(g);
  EXPECT_EQ(message_of(g.error()),
            "'structured_outputs': the regular expression has 65 bytes, more than the 64 allowed "
            "(structured_outputs.max_spec_bytes)");
  g = small.compile(format(kind::choice, "", {"a", "b", "c", "d"}));
  ASSERT_FALSE(g);
  EXPECT_EQ(message_of(g.error()),
            "'structured_outputs': the choice list has 4 strings, more than the 3 allowed");
  EXPECT_TRUE(small.compile(format(kind::regex, std::string(64, 'a'))));
}

TEST_F(grammar_test, a_repeated_format_comes_from_the_cache) {
  const auto c =
      format(kind::json_schema, R"({"type":"object","properties":{"x":{"type":"string"}}})");
  auto first = compile(c);
  const auto bytes = compiler->cache_bytes();
  EXPECT_GT(bytes, 0);
  auto second = compile(c);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(compiler->cache_bytes(), bytes);
  EXPECT_EQ(first.get(), second.get());
  // A cache of one format's bytes keeps the latest one only.
  compile_limits l;
  l.cache_bytes = 1;
  grammar_compiler small{*tokenizer, tokenizer->vocab_size(), l};
  auto a = small.compile(c);
  auto b = small.compile(format(kind::regex, "[a-z]+"));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(small.cache_bytes(), int64_t((*b)->memory_bytes()));
  EXPECT_EQ(small.compile(format(kind::regex, "[a-z]+"))->get(), b->get());
  EXPECT_NE(small.compile(c)->get(), a->get());
}

TEST(grammar_choice, escapes_quotes_backslashes_and_control_bytes) {
  EXPECT_EQ(choice_ebnf({"a", "say \"x\"", "b\\c", "t\tn\n", ""}),
            R"(root ::= "a" | "say \"x\"" | "b\\c" | "t\u0009n\u000a" | "")");
}

TEST(grammar_bounded_runner, a_job_past_its_limit_is_refused_and_finishes_later) {
  bounded_runner runner{std::chrono::milliseconds{0}, 1};
  std::promise<void> release;
  auto released = release.get_future().share();
  std::promise<void> finished;
  auto done = finished.get_future();
  auto r = runner.run<int>("compiling x", [released, &finished]() -> expected<int> {
    released.wait();
    finished.set_value();
    return 7;
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(message_of(r.error()),
            "compiling x took longer than 0 ms (structured_outputs.compile_timeout_ms)");
  // The job still holds its place: one more is refused while it runs.
  EXPECT_EQ(runner.running(), 1);
  auto full = runner.run<int>("compiling y", [] { return expected<int>{1}; });
  ASSERT_FALSE(full);
  EXPECT_EQ(code_of(full.error()), ec::rejected_queue_full);
  release.set_value();
  done.wait();
  // Its place comes back once it ended.
  runner.wait_until_idle();
  EXPECT_EQ(runner.running(), 0);
}

TEST(grammar_bounded_runner, a_job_within_its_limit_gives_its_result_or_its_error) {
  bounded_runner runner{std::chrono::hours{1}, 2};
  auto ok = runner.run<int>("x", [] { return expected<int>{42}; });
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 42);
  auto bad = runner.run<int>("x", [] { return expected<int>{make_error(ec::bad_request, "no")}; });
  ASSERT_FALSE(bad);
  EXPECT_EQ(message_of(bad.error()), "no");
}

}  // namespace
