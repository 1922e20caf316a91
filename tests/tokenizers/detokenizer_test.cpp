// Detokenizer tests: the expected story reproduced from its ids, UTF-8 safety when byte-fallback
// tokens split a character, U+FFFD for invalid bytes as transformers' decode writes them (one per
// byte token of a run that is not UTF-8), and decode_prompt.
#include "tokenizers/detokenizer.hpp"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tokenizers/utf8.hpp"
#include "tests/support/model_files.hpp"

namespace conveyor::tokenizers {

namespace {

using ids = std::vector<int32_t>;

/// The id of the byte-fallback token of `b` in tok512.
constexpr int32_t byte_token(uint8_t b) {
  return 3 + b;
}

class detokenizer_test : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto loaded = load_tokenizer(test::source_path("models/stories260K/" + GetParam()));
    ASSERT_TRUE(loaded) << message_of(loaded.error());
    tok = *loaded;
  }

  std::shared_ptr<const tokenizer> tok;
};

}  // namespace

TEST_P(detokenizer_test, reproduces_the_expected_story) {
  const auto run = test::load_expected_run();
  ASSERT_EQ(run.prompt, (ids{1, 403, 407, 261, 378}));
  ASSERT_EQ(run.sequence.size(), 65u);
  // run.c prints one "\n" after the generated text; it is no token (the last ids are <0x0A>,
  // "L", "ily"), so the decoded text is the file without its final newline.
  ASSERT_EQ(run.text.back(), '\n');
  const std::string expected = run.text.substr(0, run.text.size() - 1);
  // All bytes of the sequence after BOS, less the dummy-prefix space, are the .txt.
  std::string bytes;
  for (size_t i = 1; i < run.sequence.size(); ++i) bytes += tok->token_bytes(run.sequence[i]);
  ASSERT_EQ(bytes.substr(0, 5), " Once");
  EXPECT_EQ(bytes.substr(1), expected);
  // The way Conveyor prints it: the prompt, then the generated tokens one at a time.
  const std::string prompt = decode_prompt(*tok, run.prompt);
  EXPECT_EQ(prompt, "Once upon a time");
  std::string streamed;
  incremental_detokenizer detok{tok};
  for (auto id : run.generated()) streamed += detok.push(id);
  streamed += detok.flush();
  EXPECT_EQ(prompt + streamed, expected);
  // 59 tokens stop short at "\nL", as the model README says.
  incremental_detokenizer short_run{tok};
  const auto generated = run.generated();
  const std::string text59 = short_run.push(ids(generated.begin(), generated.end() - 1));
  EXPECT_EQ(prompt + text59 + "ily", expected);
}

TEST_P(detokenizer_test, an_empty_prompt_prints_as_run_c_prints_it) {
  // run.c with no prompt: BOS, then 64 greedy tokens, the first "▁Once" printed as "Once".
  std::ifstream in(test::source_path("models/stories260K/expected/greedy_empty_prompt_n64.tokens"));
  std::string line;
  ids sequence;
  while (std::getline(in, line))
    if (line.rfind("SEQ ", 0) == 0) {
      std::istringstream is(line.substr(4));
      for (int32_t id; is >> id;) sequence.push_back(id);
    }
  ASSERT_EQ(sequence.size(), 65u);
  ASSERT_EQ(sequence.front(), tok->bos_id());
  std::ifstream txt(test::source_path("models/stories260K/expected/greedy_empty_prompt_n64.txt"),
                    std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(txt), std::istreambuf_iterator<char>()};
  ASSERT_EQ(text.back(), '\n');  // run.c's own final newline, no token
  incremental_detokenizer detok{tok, tok->bos_id()};
  std::string streamed;
  for (size_t i = 1; i < sequence.size(); ++i) streamed += detok.push(sequence[i]);
  streamed += detok.flush();
  EXPECT_EQ(streamed, text.substr(0, text.size() - 1));
}

TEST_P(detokenizer_test, drops_only_the_space_right_after_bos) {
  incremental_detokenizer after_bos{tok, tok->bos_id()};
  EXPECT_EQ(after_bos.push(403), "Once");
  EXPECT_EQ(after_bos.push(403), " Once");
  // BOS pushed first: the piece after it loses its space too, as in run.c.
  incremental_detokenizer inline_bos{tok};
  EXPECT_EQ(inline_bos.push(ids{tok->bos_id(), 403, 410}), "Once ");
  // A BOS after text: the text does not start there, so the space stays.
  EXPECT_EQ(inline_bos.push(ids{tok->bos_id(), 403}), " Once");
  // After another token, or with nothing before, the space stays.
  EXPECT_EQ((incremental_detokenizer{tok, 403}.push(403)), " Once");
  EXPECT_EQ((incremental_detokenizer{tok}.push(403)), " Once");
}

TEST_P(detokenizer_test, keeps_every_space_of_generated_text) {
  incremental_detokenizer detok{tok};
  EXPECT_EQ(detok.push(403), " Once");  // "▁Once": generated text keeps its space
  EXPECT_EQ(detok.push(410), " ");
  EXPECT_EQ(detok.push(tok->eos_id()), "");
  EXPECT_EQ(detok.flush(), "");
}

TEST_P(detokenizer_test, holds_a_three_byte_character_until_complete) {
  // "中" is E4 B8 AD, three byte-fallback tokens.
  ASSERT_EQ(*tok->encode("中", false),
            (ids{410, byte_token(0xE4), byte_token(0xB8), byte_token(0xAD)}));
  incremental_detokenizer detok{tok};
  EXPECT_EQ(detok.push(410), " ");
  EXPECT_EQ(detok.push(byte_token(0xE4)), "");
  EXPECT_EQ(detok.held_bytes(), 1u);
  EXPECT_EQ(detok.push(byte_token(0xB8)), "");
  EXPECT_EQ(detok.held_bytes(), 2u);
  EXPECT_EQ(detok.push(byte_token(0xAD)), "中");
  EXPECT_EQ(detok.held_bytes(), 0u);
  EXPECT_EQ(detok.flush(), "");
  // A control token inside the run does not end it (transformers skips it before decoding).
  EXPECT_EQ(detok.push(ids{byte_token(0xC3), tok->eos_id()}), "");
  EXPECT_EQ(detok.push(byte_token(0xA9)), "é");
}

TEST_P(detokenizer_test, holds_a_four_byte_character_until_complete) {
  // "😀" is F0 9F 98 80; "." follows it in the same push as the last byte.
  incremental_detokenizer detok{tok};
  EXPECT_EQ(detok.push(byte_token(0xF0)), "");
  EXPECT_EQ(detok.push(byte_token(0x9F)), "");
  EXPECT_EQ(detok.push(byte_token(0x98)), "");
  EXPECT_EQ(detok.push(ids{byte_token(0x80), 426}), "😀.");
  EXPECT_EQ(detok.flush(), "");
}

TEST_P(detokenizer_test, every_encoded_text_streams_back_whole) {
  for (const std::string text :
       {"Once upon a time", "中文 and 😀 with é", "tab\tnew\nline", "👩‍👩‍👧 family"}) {
    const auto encoded = *tok->encode(text, true);
    incremental_detokenizer detok{tok};
    std::string streamed;
    for (auto id : encoded) {
      const auto chunk = detok.push(id);
      // Every chunk is whole UTF-8 on its own.
      std::string copy = chunk;
      EXPECT_EQ(drain_utf8(copy, false), chunk);
      EXPECT_TRUE(copy.empty());
      streamed += chunk;
    }
    streamed += detok.flush();
    // The space of the dummy prefix follows BOS, so it goes, as in decode_prompt.
    EXPECT_EQ(streamed, text);
    EXPECT_EQ(decode_prompt(*tok, encoded), text);
  }
}

TEST_P(detokenizer_test, flush_replaces_an_incomplete_character) {
  incremental_detokenizer detok{tok};
  EXPECT_EQ(detok.push(ids{426, byte_token(0xE4), byte_token(0xB8)}), ".");
  // One U+FFFD per byte token of the run, as transformers' decode writes.
  EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");
  // The detokenizer starts over after a flush.
  EXPECT_EQ(detok.held_bytes(), 0u);
  EXPECT_EQ(detok.push(485), "é");
}

TEST_P(detokenizer_test, invalid_bytes_become_replacement_characters_at_once) {
  // As transformers' decode (tokenizers' ByteFallback decoder): a run of byte tokens that is not
  // UTF-8 is one U+FFFD per token.
  const std::string r{replacement_character};
  incremental_detokenizer detok{tok};
  // 0xFF never starts a character.
  EXPECT_EQ(detok.push(byte_token(0xFF)), r);
  // Each further byte token of that run, a stray continuation byte or not, is one more.
  EXPECT_EQ(detok.push(byte_token(0x80)), r);
  EXPECT_EQ(detok.push(byte_token(0xE4)), r);
  EXPECT_EQ(detok.push(413), "t");
  // An incomplete character cut short by a normal piece: one U+FFFD per byte, then the piece.
  EXPECT_EQ(detok.push(byte_token(0xE4)), "");
  EXPECT_EQ(detok.push(byte_token(0xB8)), "");
  EXPECT_EQ(detok.push(413), r + r + "t");
  // An overlong form (C0 AF), then a surrogate (ED A0 80) in a run of its own.
  EXPECT_EQ(detok.push(ids{byte_token(0xC0), byte_token(0xAF)}), r + r);
  EXPECT_EQ(detok.push(ids{413, byte_token(0xED), byte_token(0xA0), byte_token(0x80)}),
            "t" + r + r + r);
  EXPECT_EQ(detok.flush(), "");
}

TEST_P(detokenizer_test, a_run_keeps_the_characters_it_streamed_before_it_turned_invalid) {
  // transformers decodes E2 82 AC E2 82 as five U+FFFD (the run is not UTF-8 as a whole); the
  // stream sent "€" when it completed and cannot take it back: the bytes after it are U+FFFD,
  // one per token, and decoding the ids whole gives the same text.
  const std::string r{replacement_character};
  const ids sequence{byte_token(0xE2), byte_token(0x82), byte_token(0xAC), byte_token(0xE2),
                     byte_token(0x82)};
  incremental_detokenizer detok{tok};
  EXPECT_EQ(detok.push(ids(sequence.begin(), sequence.begin() + 3)), "\xE2\x82\xAC");
  EXPECT_EQ(detok.push(ids(sequence.begin() + 3, sequence.end())), "");
  EXPECT_EQ(detok.flush(), r + r);
  EXPECT_EQ(decode_prompt(*tok, sequence), "\xE2\x82\xAC" + r + r);
}

TEST_P(detokenizer_test, decode_prompt_drops_one_leading_space) {
  EXPECT_EQ(decode_prompt(*tok, *tok->encode("Once upon a time", true)), "Once upon a time");
  EXPECT_EQ(decode_prompt(*tok, ids{1, 410, 410, 413}), " t");
  EXPECT_EQ(decode_prompt(*tok, ids{1}), "");
  EXPECT_EQ(decode_prompt(*tok, ids{}), "");
  EXPECT_EQ(decode_prompt(*tok, ids{411, 410}), "e ");
  EXPECT_EQ(decode_prompt(*tok, ids{410, byte_token(0xE4)}), "\xEF\xBF\xBD");
}

TEST_P(detokenizer_test, peek_is_push_without_pushing) {
  // The texts that log-probabilities report: what push would return, the state left alone.
  incremental_detokenizer detok{tok, tok->bos_id()};
  EXPECT_EQ(detok.peek(403), "Once");  // after BOS: no leading space
  EXPECT_EQ(detok.peek(403), "Once");
  EXPECT_EQ(detok.push(403), "Once");
  EXPECT_EQ(detok.peek(403), " Once");
  EXPECT_EQ(detok.peek(tok->eos_id()), "");
  // "é" is <0xC3><0xA9>: the first byte adds nothing yet, the second the whole character.
  EXPECT_EQ(detok.peek(byte_token(0xC3)), "");
  EXPECT_EQ(detok.push(byte_token(0xC3)), "");
  EXPECT_EQ(detok.held_bytes(), 1u);
  EXPECT_EQ(detok.peek(byte_token(0xA9)), "\xC3\xA9");
  EXPECT_EQ(detok.held_bytes(), 1u);
  EXPECT_EQ(detok.push(byte_token(0xA9)), "\xC3\xA9");
}

INSTANTIATE_TEST_SUITE_P(both_tokenizers, detokenizer_test,
                         ::testing::Values("tok512.model", "tok512.bin"), [](const auto& info) {
                           return info.param == "tok512.bin" ? std::string{"llama2c"}
                                                             : std::string{"sentencepiece"};
                         });

// -- drain_utf8 ----------------------------------------------------------------------------------

TEST(drain_utf8, keeps_only_an_incomplete_tail) {
  std::string pending = "ab\xE4\xB8";
  EXPECT_EQ(drain_utf8(pending, false), "ab");
  EXPECT_EQ(pending, "\xE4\xB8");
  pending += "\xAD";
  EXPECT_EQ(drain_utf8(pending, false), "中");
  EXPECT_EQ(pending, "");
  // F4 90 is above U+10FFFF: invalid at once, as is the continuation byte after it.
  pending = "\xF4\x90";
  EXPECT_EQ(drain_utf8(pending, false), "\xEF\xBF\xBD\xEF\xBF\xBD");
  pending = "\xF0\x9F\x98";
  EXPECT_EQ(drain_utf8(pending, true), "\xEF\xBF\xBD");
  EXPECT_EQ(pending, "");
}


// Ill-formed sequences, each replaced as Python's bytes.decode("utf-8", "replace") replaces it
// (one U+FFFD per maximal subpart, Unicode 15 section 3.9): overlong forms, surrogates, code
// points above U+10FFFF, a lead byte that never starts a character, a truncated character.
TEST(drain_utf8, replaces_known_invalid_sequences_as_python_does) {
  const std::string r{replacement_character};
  const std::pair<std::string, std::string> cases[] = {
      {"\xC0\x80", r + r},                     // overlong NUL
      {"\xE0\x80\x80", r + r + r},              // overlong three-byte NUL
      {"\xF0\x80\x80\x80", r + r + r + r},       // overlong four-byte NUL
      {"\xED\xA0\x80", r + r + r},              // the surrogate U+D800
      {"\xF4\x90\x80\x80", r + r + r + r},       // U+110000
      {"\xF8" "a", r + "a"},                    // not a lead byte
      {"\xE2\x82x", r + "x"},                   // a truncated character, then more text
      {"\xED\x9F\xBF\xF0\x9F\x98\x80", "\xED\x9F\xBF\xF0\x9F\x98\x80"},  // U+D7FF, U+1F600
  };
  for (const auto& [bytes, expected] : cases) {
    std::string pending = bytes;
    EXPECT_EQ(drain_utf8(pending, false), expected) << test::escaped(bytes);
    EXPECT_EQ(pending, "") << test::escaped(bytes);
    EXPECT_EQ(valid_utf8(bytes), bytes == expected) << test::escaped(bytes);
  }
}

}  // namespace conveyor::tokenizers
