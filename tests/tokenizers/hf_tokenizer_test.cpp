// tokenizer.json tokenizers against the Hugging Face tokenizers library: the reference ids of
// tests/fixtures/tokenizers/ (tools/fixtures/make_tokenizers.py) for every corpus string, the
// reference decode, UTF-8-safe streaming, BOS/EOS from tokenizer_config.json, and the refusal of
// malformed or unsupported files naming the file and the component.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizers/detokenizer.hpp"
#include "tokenizers/tokenizer.hpp"
#include "tokenizers/utf8.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/model_files.hpp"

namespace conveyor::tokenizers {

namespace {

using test::escaped;

using ids = std::vector<int32_t>;
using json = nlohmann::json;

const std::string fixtures = std::string{CONVEYOR_SOURCE_DIR} + "/tests/fixtures/tokenizers/";

json read_json(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

const std::vector<std::string>& corpus() {
  static const auto strings =
      read_json(fixtures + "corpus.json")["strings"].get<std::vector<std::string>>();
  return strings;
}


std::string render(const ids& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}


/// The reference of one fixture tokenizer.
struct reference {
  std::vector<ids> plain;
  std::vector<ids> special;
  std::vector<std::string> decoded;
};

reference read_reference(const std::string& name) {
  auto doc = read_json(fixtures + name + "/expected.json");
  return {doc["ids"].get<std::vector<ids>>(), doc["ids_special"].get<std::vector<ids>>(),
          doc["decoded"].get<std::vector<std::string>>()};
}

class hf_fixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto loaded = load_tokenizer(fixtures + GetParam() + "/tokenizer.json");
    ASSERT_TRUE(loaded) << message_of(loaded.error());
    tok = *loaded;
    ref = read_reference(GetParam());
    ASSERT_EQ(ref.plain.size(), corpus().size());
  }
  std::shared_ptr<const tokenizer> tok;
  reference ref;
};

}  // namespace

TEST(hf_corpus, has_at_least_2000_strings_of_every_kind) {
  const auto& strings = corpus();
  EXPECT_GE(strings.size(), 2000u);
  const auto count = [&](std::string_view needle) {
    size_t n = 0;
    for (const auto& s : strings) n += s.find(needle) != std::string::npos;
    return n;
  };
  EXPECT_GT(count("  "), 50u);
  EXPECT_GT(count("\n"), 50u);
  EXPECT_GT(count("<|endoftext|>"), 20u);
  EXPECT_GT(count("</s>"), 10u);
  EXPECT_GT(count("\xE4\xBD\xA0"), 10u);      // 你
  EXPECT_GT(count("\xF0\x9F\x98\x80"), 10u);  // 😀
  EXPECT_GT(count("caf\xC3\xA9"), 10u);       // café
  EXPECT_GT(count("Once upon a time"), 0u);   // the workload prompts
}

TEST_P(hf_fixture, ids_equal_the_reference_for_every_string) {
  size_t failures = 0;
  for (size_t i = 0; i < corpus().size(); ++i) {
    const auto& text = corpus()[i];
    const auto plain = *tok->encode(text, false);
    const auto special = *tok->encode(text, true);
    if (plain != ref.plain[i] || special != ref.special[i]) {
      if (++failures <= 5)
        ADD_FAILURE() << GetParam() << " string " << i << " \"" << escaped(text) << "\"\n  got "
                      << render(plain) << "\n want " << render(ref.plain[i]) << "\n  got+ "
                      << render(special) << "\n want+ " << render(ref.special[i]);
    }
  }
  EXPECT_EQ(failures, 0u) << "of " << corpus().size() << " strings";
}

TEST_P(hf_fixture, decoding_equals_the_reference_decode) {
  size_t failures = 0;
  size_t round_trips = 0;
  for (size_t i = 0; i < corpus().size(); ++i) {
    const auto text = decode_prompt(*tok, ref.plain[i]);
    round_trips += text == corpus()[i];
    if (text != ref.decoded[i] && ++failures <= 5)
      ADD_FAILURE() << GetParam() << " string " << i << "\n  got \"" << escaped(text)
                    << "\"\n want \"" << escaped(ref.decoded[i]) << "\"";
  }
  EXPECT_EQ(failures, 0u);
  // Most strings come back exactly (the rest lose what the reference loses: a leading space,
  // characters NFC changes, special tokens).
  EXPECT_GT(round_trips, corpus().size() * 9 / 10);
}

TEST_P(hf_fixture, streaming_one_token_at_a_time_is_utf8_safe_and_complete) {
  size_t failures = 0;
  for (size_t i = 0; i < corpus().size(); ++i) {
    incremental_detokenizer detok{tok};
    std::string streamed;
    bool valid = true;
    for (auto id : ref.plain[i]) {
      const auto piece = detok.push(id);
      valid = valid && valid_utf8(piece);
      streamed += piece;
    }
    const auto rest = detok.flush();
    valid = valid && valid_utf8(rest);
    streamed += rest;
    std::string whole;
    for (auto id : ref.plain[i]) whole += tok->token_bytes(id);
    whole = drain_utf8(whole, true);
    auto prompt = decode_prompt(*tok, ref.plain[i]);
    const bool stripped = tok->decode_strips_leading_space() && !whole.empty() && whole[0] == ' ';
    // The space right after BOS goes in the stream too, as run.c and SentencePiece drop it.
    const bool after_bos = !ref.plain[i].empty() && ref.plain[i][0] == tok->bos_id();
    const std::string expected_stream = stripped && after_bos ? whole.substr(1) : whole;
    if ((!valid || streamed != expected_stream || prompt != (stripped ? whole.substr(1) : whole)) &&
        ++failures <= 5)
      ADD_FAILURE() << GetParam() << " string " << i << " streamed \"" << escaped(streamed)
                    << "\" whole \"" << escaped(whole) << "\" valid " << valid;
  }
  EXPECT_EQ(failures, 0u);
}

TEST_P(hf_fixture, threads_share_one_tokenizer) {
  std::vector<std::vector<ids>> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t)
    threads.emplace_back([&, t] {
      for (size_t i = t; i < corpus().size(); i += 2)
        results[t].push_back(*tok->encode(corpus()[i], false));
    });
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < results.size(); ++t)
    for (size_t k = 0; k < results[t].size(); ++k)
      ASSERT_EQ(results[t][k], ref.plain[t + 2 * k]) << "thread " << t << " string " << t + 2 * k;
}

INSTANTIATE_TEST_SUITE_P(fixtures, hf_fixture,
                         ::testing::Values("gpt2", "llama_spm", "llama_legacy", "llama3"),
                         [](const auto& info) { return info.param; });

// -- ids, BOS/EOS and details --------------------------------------------------------------------

TEST(hf_tokenizer, bos_eos_and_leading_space_per_family) {
  auto gpt2 = load_tokenizer(fixtures + "gpt2");  // a directory holding tokenizer.json
  ASSERT_TRUE(gpt2) << message_of(gpt2.error());
  EXPECT_EQ((*gpt2)->bos_id(), 50256);
  EXPECT_EQ((*gpt2)->eos_id(), 50256);
  EXPECT_EQ((*gpt2)->vocab_size(), 50257);
  EXPECT_FALSE((*gpt2)->decode_strips_leading_space());
  EXPECT_EQ(*(*gpt2)->encode("Hello world", true), (ids{15496, 995}));  // GPT-2 adds no BOS
  EXPECT_EQ(*(*gpt2)->encode("a<|endoftext|>b", false), (ids{64, 50256, 65}));
  EXPECT_EQ((*gpt2)->token_bytes(50256), "");
  EXPECT_EQ((*gpt2)->token_bytes(995), " world");
  EXPECT_EQ(decode_prompt(**gpt2, {995}), " world");

  auto spm = load_tokenizer(fixtures + "llama_spm/tokenizer.json");
  ASSERT_TRUE(spm) << message_of(spm.error());
  EXPECT_EQ((*spm)->bos_id(), 1);
  EXPECT_EQ((*spm)->eos_id(), 2);
  EXPECT_TRUE((*spm)->decode_strips_leading_space());
  const auto once = *(*spm)->encode("Once upon a time", true);
  ASSERT_FALSE(once.empty());
  EXPECT_EQ(once.front(), 1);
  EXPECT_EQ((*spm)->token_bytes(13), "\n");  // <0x0A>
  EXPECT_EQ(decode_prompt(**spm, once), "Once upon a time");

  auto llama3 = load_tokenizer(fixtures + "llama3/tokenizer.json");
  ASSERT_TRUE(llama3) << message_of(llama3.error());
  EXPECT_EQ((*llama3)->bos_id(), 0);     // <|begin_of_text|>
  EXPECT_EQ((*llama3)->eos_id(), 1200);  // <|eot_id|> from tokenizer_config.json
  EXPECT_EQ((*llama3)->encode("hi", true)->front(), 0);
  EXPECT_EQ((*llama3)->token_bytes(1201), " Conveyor");  // an added token that is not special
}

TEST(hf_tokenizer, invalid_utf8_input_is_encoded_as_replacement_characters) {
  auto tok = load_tokenizer(fixtures + "gpt2");
  ASSERT_TRUE(tok);
  EXPECT_EQ(*(*tok)->encode("a\xFF"
                            "b",
                            false),
            *(*tok)->encode("a\xEF\xBF\xBD"
                            "b",
                            false));
}

// -- text that normalizes longer, inputs past PCRE2's defaults, bytes that are not UTF-8 --------

TEST(hf_normalizers, ids_equal_the_reference_on_text_that_grows) {
  // NFKC and NFKD make 18 characters of U+FDFA, NFD four of U+1F82: more than three times the
  // input; the texts hold long runs of them.
  const auto doc = read_json(fixtures + "normalizers/expected.json");
  const auto texts = doc["texts"].get<std::vector<std::string>>();
  for (const char* form : {"nfc", "nfd", "nfkc", "nfkd"}) {
    auto tok = load_tokenizer(fixtures + "normalizers/" + form + "/tokenizer.json");
    ASSERT_TRUE(tok) << message_of(tok.error());
    const auto expected = doc[form].get<std::vector<ids>>();
    ASSERT_EQ(expected.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto got = *(*tok)->encode(texts[i], false);
      EXPECT_EQ(got, expected[i]) << form << " text " << i << " (" << texts[i].size()
                                  << " bytes): got " << got.size() << " ids, want "
                                  << expected[i].size();
    }
  }
}

TEST(hf_long_input, a_whitespace_run_past_pcre2_default_limits_tokenizes_as_the_reference) {
  // Llama 3's "\s*[\r\n]+" backtracks once per character of a whitespace run: ten million
  // spaces ask PCRE2 for more than its default match limit.
  const auto doc = read_json(fixtures + "long_input.json");
  ASSERT_FALSE(doc["cases"].empty());
  for (const auto& c : doc["cases"]) {
    const auto name = c["tokenizer"].get<std::string>();
    auto tok = load_tokenizer(fixtures + name);
    ASSERT_TRUE(tok) << message_of(tok.error());
    std::string text;
    for (const auto& part : c["parts"])
      for (int64_t n = part[1].get<int64_t>(); n > 0; --n) text += part[0].get<std::string>();
    ids expected;
    for (const auto& run : c["ids"]) expected.insert(expected.end(), run[1].get<size_t>(), run[0]);
    const auto got = *(*tok)->encode(text, false);
    ASSERT_EQ(got.size(), expected.size()) << name << ": " << text.size() << " bytes";
    EXPECT_TRUE(got == expected) << name << ": the ids differ";
  }
}

TEST(hf_decode, bytes_that_are_not_utf8_decode_as_transformers_does_whole_and_streamed) {
  // transformers' decode: a byte-fallback tokenizer (tokenizers' ByteFallback decoder) writes one
  // U+FFFD per byte token of a run of them that is not UTF-8 as a whole; a byte-level one writes
  // one per maximal invalid subpart of all the bytes (Rust's from_utf8_lossy). A run that spells
  // whole characters before it turns invalid keeps those characters in a stream (text_assembler):
  // there the whole text is the streamed one.
  const auto doc = read_json(fixtures + "invalid_utf8.json");
  for (const char* name : {"llama_spm", "gpt2"}) {
    auto loaded = load_tokenizer(fixtures + name);
    ASSERT_TRUE(loaded) << message_of(loaded.error());
    const auto tok = *loaded;
    size_t failures = 0;
    size_t kept_characters = 0;
    for (const auto& c : doc[name]) {
      const auto sequence = c["ids"].get<ids>();
      const auto expected = c["text"].get<std::string>();
      const auto whole = decode_prompt(*tok, sequence);
      // Generated text after a prompt of BOS alone, one token at a time, then the end.
      incremental_detokenizer detok{tok, tok->bos_id()};
      std::string streamed;
      for (auto id : sequence) {
        const auto piece = detok.push(id);
        EXPECT_TRUE(valid_utf8(piece)) << name << " " << render(sequence);
        streamed += piece;
      }
      streamed += detok.flush();
      if (c["whole_characters_first"].get<bool>()) {
        ++kept_characters;
        EXPECT_EQ(whole, streamed) << name << " " << render(sequence);
        EXPECT_NE(whole, expected) << name << " " << render(sequence);
        continue;
      }
      if ((whole != expected || streamed != expected) && ++failures <= 8)
        ADD_FAILURE() << name << " ids " << render(sequence) << "\n  want \"" << escaped(expected)
                      << "\"\n whole \"" << escaped(whole) << "\"\nstream \"" << escaped(streamed)
                      << "\"";
    }
    EXPECT_EQ(failures, 0u) << name << ", of " << doc[name].size() - kept_characters
                            << " sequences";
    EXPECT_LT(kept_characters, doc[name].size() / 4) << name;
  }
}

// -- refusals ------------------------------------------------------------------------------------

namespace {

class hf_errors : public ::testing::Test {
 protected:
  void SetUp() override {
    base = json::parse(R"({
      "version": "1.0", "truncation": null, "padding": null,
      "added_tokens": [{"id": 0, "content": "<s>", "special": true, "normalized": false}],
      "normalizer": null,
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
      "post_processor": null,
      "decoder": {"type": "ByteLevel"},
      "model": {"type": "BPE", "vocab": {"<s>": 0, "a": 1, "b": 2, "ab": 3},
                "merges": ["a b"]}})");
  }
  /// Writes `doc` (or `text`) as tokenizer.json and expects the load to fail with a message
  /// that starts with the path and holds `needle`.
  void expect_refused(const json& doc, const std::string& needle, const std::string& text = "") {
    const auto path = (dir / "tokenizer.json").string();
    std::ofstream{path} << (text.empty() ? doc.dump() : text);
    auto tok = load_tokenizer(path);
    ASSERT_FALSE(tok) << "accepted: " << needle;
    EXPECT_EQ(code_of(tok.error()), ec::bad_file);
    const auto message = message_of(tok.error());
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }

  test::temp_dir folder{"conveyor_hf_errors"};
  std::filesystem::path dir{folder.path()};
  json base;
};

}  // namespace

TEST_F(hf_errors, the_base_file_loads_and_merges) {
  const auto path = (dir / "tokenizer.json").string();
  std::ofstream{path} << base.dump();
  auto tok = load_tokenizer(path);
  ASSERT_TRUE(tok) << message_of(tok.error());
  EXPECT_EQ(*(*tok)->encode("ab<s>a", false), (ids{3, 0, 1}));
}

TEST_F(hf_errors, unsupported_components_are_named) {
  auto doc = base;
  doc["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_refused(doc, "pre_tokenizer type 'Whitespace' is not supported; supported: ByteLevel");
  doc = base;
  doc["normalizer"] = {{"type", "Lowercase"}};
  expect_refused(doc, "normalizer type 'Lowercase' is not supported");
  doc = base;
  doc["model"]["type"] = "WordPiece";
  expect_refused(doc, "model type 'WordPiece' is not supported; supported: BPE");
  doc = base;
  doc["decoder"] = nullptr;
  expect_refused(doc, "decoder must be an object");
  doc = base;
  doc["decoder"] = {{"type", "WordPiece"}};
  expect_refused(doc, "decoder type 'WordPiece' is not supported");
  doc = base;
  doc["post_processor"] = {{"type", "BertProcessing"}};
  expect_refused(doc, "post_processor type 'BertProcessing' is not supported");
  doc = base;
  doc["model"]["continuing_subword_prefix"] = "##";
  expect_refused(doc, "model BPE 'continuing_subword_prefix' is not supported");
  doc = base;
  doc["truncation"] = {{"max_length", 8}};
  expect_refused(doc, "'truncation' is not supported");
}

TEST_F(hf_errors, malformed_files_are_named) {
  expect_refused(base, "not valid JSON", "{\"model\": ");
  auto doc = base;
  doc.erase("model");
  expect_refused(doc, "no 'model'");
  doc = base;
  doc["model"]["merges"] = json::array({"a c"});
  expect_refused(doc, "model merge 0 ('a' 'c') uses or makes a token not in the vocab");
  doc = base;
  doc["model"]["vocab"]["x"] = "seven";
  expect_refused(doc, "model vocab id of 'x' is not an integer");
  doc = base;
  doc["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  expect_refused(doc, "pre_tokenizer Split: regex '(unclosed' does not compile");
  doc = base;
  doc["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}};
  expect_refused(doc, "Split behavior 'Sideways' is not one of");
  doc = base;
  doc["added_tokens"] = json::array({{{"content", "<s>"}}});
  expect_refused(doc, "added_tokens[0] needs an integer 'id'");
  doc = base;
  doc["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", {{{"type", "ByteLevel"}}, {{"type", "Metaspace"}, {"replacement", "_"}}}}};
  expect_refused(doc, "pre_tokenizer Metaspace after ByteLevel is not supported");
}

TEST_F(hf_errors, a_regex_that_cannot_finish_fails_the_encoding_naming_the_tokenizer) {
  const auto path = (dir / "tokenizer.json").string();
  const auto expect_failure = [&](const json& doc, const std::string& text,
                                  const std::string& component) {
    std::ofstream{path} << doc.dump();
    auto tok = load_tokenizer(path);
    ASSERT_TRUE(tok) << message_of(tok.error());
    const auto encoded = (*tok)->encode(text, false);
    ASSERT_FALSE(encoded) << component << ": got " << encoded->size() << " ids";
    EXPECT_EQ(code_of(encoded.error()), ec::bad_request);
    const auto message = message_of(encoded.error());
    EXPECT_EQ(message.rfind(path + ": " + component + ": regex '", 0), 0u) << message;
    EXPECT_NE(message.find("cannot finish its search in a text of " + std::to_string(text.size()) +
                           " bytes (PCRE2: "),
              std::string::npos)
        << message;
    // A text it can finish still encodes.
    EXPECT_TRUE((*tok)->encode("ab", false)) << component;
  };
  // "(a+)+\d" tries every way to split forty a's before it gives up: past the match limit.
  const std::string forty_a(40, 'a');
  auto doc = base;
  doc["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(a+)+\\d"}}}, {"behavior", "Isolated"}};
  expect_failure(doc, forty_a + "!", "pre_tokenizer Split");
  doc = base;
  doc["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "(a+)+\\d"}}}, {"content", ""}};
  expect_failure(doc, "b" + forty_a + "!", "normalizer Replace");
  // A lazy group repeated a million times: past the JIT stack (the interpreter's heap without
  // JIT).
  std::string pairs;
  for (int i = 0; i < 1'000'000; ++i) pairs += "ab";
  doc = base;
  doc["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(?:a|b)*?c"}}}, {"behavior", "Isolated"}};
  expect_failure(doc, pairs + "!", "pre_tokenizer Split");
}

TEST_F(hf_errors, a_tokenizer_config_naming_an_unknown_token_is_refused) {
  std::ofstream{dir / "tokenizer.json"} << base.dump();
  std::ofstream{dir / "tokenizer_config.json"} << R"({"eos_token": "</nope>"})";
  auto tok = load_tokenizer(dir.string());
  ASSERT_FALSE(tok);
  EXPECT_NE(
      message_of(tok.error()).find("tokenizer_config.json: eos_token '</nope>' is not a token"),
      std::string::npos)
      << message_of(tok.error());
}

TEST_F(hf_errors, a_directory_without_tokenizer_json_is_refused) {
  auto tok = load_tokenizer(dir.string());
  ASSERT_FALSE(tok);
  EXPECT_NE(message_of(tok.error()).find("a directory without tokenizer.json"), std::string::npos);
}

}  // namespace conveyor::tokenizers
