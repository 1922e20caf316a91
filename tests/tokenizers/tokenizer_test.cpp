// Tokenizer tests: exact ids on the embedded model, agreement of the two tokenizers on any text,
// the BPE rules on a hand-made vocabulary, and every loader error.
#include "tokenizers/tokenizer.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizers/llama2c_tokenizer.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/model_files.hpp"

namespace conveyor::tokenizers {

namespace {

using test::escaped;

using ids = std::vector<int32_t>;

const std::string model_dir = std::string{CONVEYOR_SOURCE_DIR} + "/models/stories260K/";
const std::string sp_path = model_dir + "tok512.model";
const std::string bin_path = model_dir + "tok512.bin";

std::shared_ptr<const tokenizer> load_or_fail(const std::string& path) {
  auto tok = load_tokenizer(path);
  if (!tok) {
    ADD_FAILURE() << message_of(tok.error());
    return nullptr;
  }
  return *tok;
}


class tokenizer_test : public ::testing::Test {
 protected:
  void SetUp() override {
    sp = load_or_fail(sp_path);
    bin = load_or_fail(bin_path);
    ASSERT_TRUE(sp && bin);
  }

  /// Expects both tokenizers to give the same ids for `text`, with and without BOS.
  void expect_agreement(std::string_view text) {
    for (bool add_bos : {false, true})
      EXPECT_EQ(*bin->encode(text, add_bos), *sp->encode(text, add_bos))
          << "text \"" << escaped(text) << "\" add_bos " << add_bos;
  }

  std::shared_ptr<const tokenizer> sp;
  std::shared_ptr<const tokenizer> bin;
};

}  // namespace

// -- exact ids on the embedded model -------------------------------------------------------------

TEST_F(tokenizer_test, once_upon_a_time_with_both_tokenizers) {
  const ids expected{1, 403, 407, 261, 378};
  EXPECT_EQ(*sp->encode("Once upon a time", true), expected);
  EXPECT_EQ(*bin->encode("Once upon a time", true), expected);
  EXPECT_EQ(*bin->encode("Once upon a time", false), ids(expected.begin() + 1, expected.end()));
}

TEST_F(tokenizer_test, vocabulary_facts) {
  for (const auto& tok : {sp, bin}) {
    EXPECT_EQ(tok->vocab_size(), 512);
    EXPECT_EQ(tok->bos_id(), 1);
    EXPECT_EQ(tok->eos_id(), 2);
  }
}

TEST_F(tokenizer_test, empty_and_blank_text_encode_to_nothing) {
  for (const auto& tok : {sp, bin}) {
    EXPECT_EQ(*tok->encode("", false), ids{});
    EXPECT_EQ(*tok->encode("", true), ids{1});
    EXPECT_EQ(*tok->encode("   ", true), ids{1});
  }
}

TEST_F(tokenizer_test, spaces_collapse_and_trim_like_sentencepiece) {
  const auto once = *bin->encode("Once upon a time", true);
  EXPECT_EQ(*bin->encode("  Once   upon a  time  ", true), once);
  EXPECT_EQ(*sp->encode("  Once   upon a  time  ", true), once);
}

TEST_F(tokenizer_test, characters_outside_the_vocabulary_fall_back_to_bytes) {
  // "\t" is no piece: dummy-prefix space (410), then <0x09> (3 + 9).
  EXPECT_EQ(*bin->encode("\t", false), (ids{410, 12}));
  // "中" is E4 B8 AD.
  EXPECT_EQ(*bin->encode("中", false), (ids{410, 3 + 0xE4, 3 + 0xB8, 3 + 0xAD}));
  // "é" is a piece of its own.
  EXPECT_EQ(*bin->encode("é", false), (ids{410, 485}));
  // An invalid byte is U+FFFD (EF BF BD), as SentencePiece's normalizer makes it.
  EXPECT_EQ(*bin->encode("\xFF", false), (ids{410, 3 + 0xEF, 3 + 0xBF, 3 + 0xBD}));
}

TEST_F(tokenizer_test, skips_merges_whose_symbols_went_stale) {
  // " s" + "ed" + "ed" + "s" + "s": the queue holds candidates for symbols that were merged away
  // meanwhile; taking one of them would drop text.
  for (const auto& tok : {sp, bin})
    EXPECT_EQ(*tok->encode("sededss", false), (ids{262, 266, 266, 419, 419}));
}

// -- agreement on any text -----------------------------------------------------------------------

TEST_F(tokenizer_test, agree_on_many_strings) {
  const std::vector<std::string> texts{
      "",
      "Once upon a time",
      "Once upon a time, there was a little girl named Lily.",
      "She loved to play outside in the park.",
      "The quick brown fox jumps over the lazy dog.",
      "Hello, world!",
      "What?! No... way; (really) [yes] {no} <maybe> \"quoted\" 'single'",
      "a-b_c/d\\e|f~g`h^i&j*k%l$m#n@o+p=q",
      "0123456789",
      "In 1999, 42 cats ate 3.14 pies and 1,000,000 crumbs.",
      " leading space",
      "   three leading spaces",
      "trailing space ",
      "trailing spaces   ",
      "double  space",
      "many      spaces      inside",
      " ",
      "   ",
      "\t",
      "tab\tseparated\tvalues",
      "\tleading tab",
      "trailing tab\t",
      "new\nline",
      "\n",
      "\n\n",
      "two\n\nparagraphs\n",
      "carriage\r\nreturn",
      " \t \n mixed \t whitespace \n ",
      "\xC2\xA0non-breaking\xC2\xA0space",
      "\xE3\x80\x80ideographic space",
      "é",
      "café au lait, crème brûlée",
      "niño",
      "中文",
      "我爱北京天安门",
      "日本語のテキスト",
      "한국어",
      "Ελληνικά",
      "русский текст",
      "😀",
      "emoji 😀🎉🚀 party",
      "👩‍👩‍👧 family",
      "mixed: Lily 😀 said “hi” — and ‘bye’… ™ €5",
      "\xE2\x96\x81",
      "a\xE2\x96\x81"
      "b",
      "x \xE2\x96\x81 y",
      "\xE2\x96\x81\xE2\x96\x81lead",
      "trail\xE2\x96\x81",
      "<s>",
      "</s>",
      "<unk>",
      "<0x0A>",
      "\n<s>\n",
      std::string("nul\0byte", 8),
      "\xFF",
      "\x80\x80",
      "bad \xE4\xB8 truncated",
      "\xC0\xAF overlong",
      "\xED\xA0\x80 surrogate",
      "\xF4\x90\x80\x80 too big",
      "end truncated \xF0\x9F\x98",
      "Lily and Ben were best friends. They liked to play with their toys.",
      "\"Can we find together?\"",
  };
  ASSERT_GE(texts.size(), 40u);
  for (const auto& text : texts) expect_agreement(text);
}

TEST_F(tokenizer_test, agree_on_workload_prompts) {
  std::ifstream in{std::string{CONVEYOR_SOURCE_DIR} + "/workloads/stories-burst-n200.jsonl"};
  ASSERT_TRUE(in) << "workloads/stories-burst-n200.jsonl is missing from the checkout";
  size_t count = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto prompt = nlohmann::json::parse(line).at("prompt").get<std::string>();
    expect_agreement(prompt);
    ++count;
  }
  EXPECT_EQ(count, 200u);
}

TEST_F(tokenizer_test, agree_on_random_text) {
  // Random strings over fragments that exercise every rule: spaces, "▁", tabs, invalid bytes,
  // multi-byte characters, pieces that merge.
  const std::vector<std::string> fragments{
      " ",  "  ", "\t",   "\n",   "\xE2\x96\x81", "\xFF", "\xE4", "\xB8", "\xAD",
      "é",  "中", "😀",    "the",  " the",         "Once", "upon", "a",    "time",
      ",",  ".",  "Lily", "play", "ed",           "ing",  "0",    "12",   "!",
      "\"", "'",  "\r",   "\xC3", "\xA9",         "ba",   "ll",   "<",    "0x",
      ">",  "s",  "T",    "he"};
  std::mt19937 gen{20240229};
  std::uniform_int_distribution<size_t> pick{0, fragments.size() - 1};
  std::uniform_int_distribution<int> length{0, 12};
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    for (int n = length(gen); n > 0; --n) text += fragments[pick(gen)];
    expect_agreement(text);
    if (HasFailure()) break;
  }
}

TEST_F(tokenizer_test, token_bytes_of_both_tokenizers) {
  for (const auto& tok : {sp, bin}) {
    EXPECT_EQ(tok->token_bytes(0), "");
    EXPECT_EQ(tok->token_bytes(1), "");
    EXPECT_EQ(tok->token_bytes(2), "");
    EXPECT_EQ(tok->token_bytes(3), std::string(1, '\0'));
    EXPECT_EQ(tok->token_bytes(3 + 0x0A), "\n");
    EXPECT_EQ(tok->token_bytes(3 + 0xFF), "\xFF");
    EXPECT_EQ(tok->token_bytes(259), " t");
    EXPECT_EQ(tok->token_bytes(403), " Once");
    EXPECT_EQ(tok->token_bytes(410), " ");
    EXPECT_EQ(tok->token_bytes(485), "é");
    EXPECT_EQ(tok->token_bytes(-1), "");
    EXPECT_EQ(tok->token_bytes(512), "");
  }
  for (int32_t id = 0; id < 512; ++id) EXPECT_EQ(bin->token_bytes(id), sp->token_bytes(id)) << id;
}

// -- normalization -------------------------------------------------------------------------------

TEST(llama2c_normalize, follows_sentencepiece) {
  EXPECT_EQ(llama2c_tokenizer::normalize(""), "");
  EXPECT_EQ(llama2c_tokenizer::normalize("   "), "");
  EXPECT_EQ(llama2c_tokenizer::normalize("a"), " a");
  EXPECT_EQ(llama2c_tokenizer::normalize("  a  b  "), " a b");
  EXPECT_EQ(llama2c_tokenizer::normalize("a\t\tb\n"), " a\t\tb\n");
  EXPECT_EQ(llama2c_tokenizer::normalize("\xE2\x96\x81"), "");
  EXPECT_EQ(llama2c_tokenizer::normalize("a\xE2\x96\x81\xE2\x96\x81"
                                         "b"),
            " a  b");
  EXPECT_EQ(llama2c_tokenizer::normalize("\xE4\xB8"), " \xEF\xBF\xBD\xEF\xBF\xBD");
}

// -- BPE rules on a hand-made vocabulary ---------------------------------------------------------

namespace {

/// A vocabulary of UNK, BOS, EOS, the 256 byte tokens, then `normal` with their scores.
std::shared_ptr<const llama2c_tokenizer> make_vocab(
    const std::vector<std::pair<std::string, float>>& normal) {
  std::vector<std::string> pieces{"<unk>", "\n<s>\n", "\n</s>\n"};
  std::vector<float> scores(3, 0.0f);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    pieces.emplace_back(buf);
    scores.push_back(0.0f);
  }
  for (const auto& [piece, score] : normal) {
    pieces.push_back(piece);
    scores.push_back(score);
  }
  auto tok = llama2c_tokenizer::make(pieces, scores, "test vocabulary");
  EXPECT_TRUE(tok) << message_of(tok.error());
  return tok ? *tok : nullptr;
}

}  // namespace

TEST(llama2c_bpe, merges_leftmost_on_equal_scores) {
  // Ids: 259 " ", 260 "a", 261 "b", 262 "ab", 263 "ba".
  auto tok = make_vocab({{" ", 0}, {"a", 0}, {"b", 0}, {"ab", -1}, {"ba", -1}});
  ASSERT_TRUE(tok);
  EXPECT_EQ(*tok->encode("aba", false), (ids{259, 262, 260}));
}

TEST(llama2c_bpe, merges_highest_score_first) {
  auto tok = make_vocab({{" ", 0}, {"a", 0}, {"b", 0}, {"ab", -2}, {"ba", -1}});
  ASSERT_TRUE(tok);
  EXPECT_EQ(*tok->encode("aba", false), (ids{259, 260, 263}));
}

TEST(llama2c_bpe, merges_repeatedly_and_falls_back_to_bytes) {
  // " ab" needs " a" then " ab"; "c" is no piece and becomes <0x63>.
  auto tok = make_vocab({{" ", 0}, {"a", 0}, {"b", 0}, {" a", -1}, {" ab", -2}});
  ASSERT_TRUE(tok);
  EXPECT_EQ(*tok->encode("abc", false), (ids{263, 3 + 'c'}));
}

TEST(llama2c_bpe, never_merges_into_control_or_byte_tokens) {
  // "<0x41>" is a byte token: the text "<0x41>" must not become id 3 + 0x41.
  auto tok = make_vocab({{"<", 0}, {"0", 0}, {"x", 0}, {"4", 0}, {"1", 0}, {">", 0}, {" ", 0}});
  ASSERT_TRUE(tok);
  EXPECT_EQ(*tok->encode("<0x41>", false), (ids{265, 259, 260, 261, 262, 263, 264}));
}

TEST(llama2c_bpe, rejects_vocabulary_without_byte_tokens) {
  auto tok = llama2c_tokenizer::make({"<unk>", "<s>", "</s>", "a"}, {0, 0, 0, 0}, "mini.bin");
  ASSERT_FALSE(tok);
  EXPECT_EQ(code_of(tok.error()), ec::bad_file);
  EXPECT_EQ(message_of(tok.error()), "mini.bin: no byte-fallback token <0x00> in the vocabulary");
}

// -- loader errors -------------------------------------------------------------------------------

namespace {

class loader_errors : public ::testing::Test {
 protected:
  /// Writes `bytes` to `name` in the test folder and returns the path.
  std::string write(const std::string& name, const std::string& bytes) {
    const auto path = (dir / name).string();
    std::ofstream out{path, std::ios::binary};
    out << bytes;
    return path;
  }

  /// The bytes of the embedded tok512.bin.
  static std::string real_bin() {
    std::ifstream in{bin_path, std::ios::binary};
    return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  }

  /// Expects loading `path` to fail with ec::bad_file and a message that is `path` followed by
  /// `problem`.
  static void expect_error(const expected<std::shared_ptr<const tokenizer>>& result,
                           const std::string& path, const std::string& problem) {
    ASSERT_FALSE(result) << path;
    EXPECT_EQ(code_of(result.error()), ec::bad_file);
    EXPECT_EQ(message_of(result.error()), path + problem);
  }

  test::temp_dir folder{"conveyor_tokenizer_test"};
  std::filesystem::path dir{folder.path()};
};

std::string le32(int32_t x) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<char>((static_cast<uint32_t>(x) >> (8 * i)) & 0xFF);
  return out;
}

}  // namespace

TEST_F(loader_errors, missing_files) {
  const auto missing_bin = (dir / "missing.bin").string();
  const auto missing_model = (dir / "missing.model").string();
  expect_error(load_llama2c_tokenizer(missing_bin), missing_bin, ": no such file");
  expect_error(load_sentencepiece_tokenizer(missing_model), missing_model, ": no such file");
  expect_error(load_tokenizer(missing_bin), missing_bin, ": no such file");
  expect_error(load_tokenizer(missing_model), missing_model, ": no such file");
}

TEST_F(loader_errors, empty_files) {
  const auto bin = write("empty.bin", "");
  const auto model = write("empty.model", "");
  expect_error(load_tokenizer(bin), bin, ": empty file");
  expect_error(load_tokenizer(model), model, ": empty file");
}

TEST_F(loader_errors, truncated_bin) {
  const auto header = write("header.bin", std::string("\x07\x00", 2));
  expect_error(load_llama2c_tokenizer(header), header, ": truncated: 2 bytes, the header needs 4");
  // The real file cut in the middle of token 1's bytes ("\n<s>\n"): 4 + (8 + 5) + 8 + 2.
  const auto cut_bytes = write("cut_bytes.bin", real_bin().substr(0, 27));
  expect_error(load_llama2c_tokenizer(cut_bytes), cut_bytes,
               ": truncated in token 1: needs 5 bytes at byte 25, the file has 2");
  // Cut in the middle of token 2's score and length.
  const auto cut_header = write("cut_header.bin", real_bin().substr(0, 33));
  expect_error(load_llama2c_tokenizer(cut_header), cut_header,
               ": truncated in the header of token 2 at byte 30");
  // Cut after token 100: a whole number of tokens, but byte tokens are missing.
  std::string bin = real_bin();
  size_t pos = 4;
  for (int t = 0; t < 100; ++t) pos += 8 + static_cast<uint8_t>(bin[pos + 4]);
  const auto short_vocab = write("short.bin", bin.substr(0, pos));
  expect_error(load_llama2c_tokenizer(short_vocab), short_vocab,
               ": no byte-fallback token <0x61> in the vocabulary");
}

TEST_F(loader_errors, bad_lengths_in_bin) {
  const auto negative = write("negative.bin", le32(7) + le32(0) + le32(-1));
  expect_error(load_llama2c_tokenizer(negative), negative,
               ": token 0 has bad length -1 (max_token_length 7) at byte 8");
  const auto too_long = write("too_long.bin", le32(7) + le32(0) + le32(8) + "12345678");
  expect_error(load_llama2c_tokenizer(too_long), too_long,
               ": token 0 has bad length 8 (max_token_length 7) at byte 8");
  const auto bad_max = write("bad_max.bin", le32(0) + le32(0) + le32(0));
  expect_error(load_llama2c_tokenizer(bad_max), bad_max, ": bad max_token_length 0");
}

TEST_F(loader_errors, not_a_sentencepiece_model) {
  const auto path = write("garbage.model", "this is not a protobuf \xFF\xFF\xFF");
  auto result = load_sentencepiece_tokenizer(path);
  ASSERT_FALSE(result);
  EXPECT_EQ(code_of(result.error()), ec::bad_file);
  EXPECT_EQ(message_of(result.error()).rfind(path + ": not a SentencePiece model (", 0), 0u)
      << message_of(result.error());
}

TEST_F(loader_errors, wrong_extension) {
  const auto path = write("tok512.txt", real_bin());
  expect_error(load_tokenizer(path), path,
               ": unknown tokenizer format '.txt' (expected .model for SentencePiece, .bin "
               "for llama2.c, tokenizer.json for Hugging Face or .gguf)");
  const auto none = write("tokenizer", real_bin());
  expect_error(load_tokenizer(none), none,
               ": unknown tokenizer format '' (expected .model for SentencePiece, .bin for "
               "llama2.c, tokenizer.json for Hugging Face or .gguf)");
}

TEST(load_tokenizer, chooses_by_extension) {
  auto sp = load_tokenizer(sp_path);
  auto bin = load_tokenizer(bin_path);
  ASSERT_TRUE(sp && bin);
  EXPECT_EQ(*(*sp)->encode("Once upon a time", true), (ids{1, 403, 407, 261, 378}));
  EXPECT_EQ(*(*bin)->encode("Once upon a time", true), (ids{1, 403, 407, 261, 378}));
}

}  // namespace conveyor::tokenizers
