// Token ids back to text: the incremental detokenizer of a generation stream, and the decoding
// of a prompt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizers/tokenizer.hpp"

namespace conveyor::tokenizers {

/// Joins the bytes of tokens into text as transformers' decode joins them, one token at a time,
/// emitting every character as soon as its last byte comes. The bytes of ordinary tokens are
/// decoded together: invalid bytes become one U+FFFD per maximal invalid subpart (the ByteLevel
/// decoder's from_utf8_lossy). A run of byte-fallback tokens (<0xE2>, see
/// tokenizer::is_byte_fallback) that is not UTF-8 gives one U+FFFD per token (the ByteFallback
/// decoder): a character cut by the end or by an ordinary token, bytes out of order, a lone
/// continuation byte. One case cannot stream as transformers decodes it: a run that spells whole
/// characters and then turns invalid (E2 82 AC E2 82) is U+FFFD throughout for transformers, but
/// its characters went out when they completed ("€", then two U+FFFD). Holding every run until
/// it ends would delay each character that byte tokens spell, Llama 2's newline <0x0A> among
/// them, by a token, and stop strings with it. Control tokens (no bytes) do not end a run. One
/// instance per text; not thread-safe.
class text_assembler {
 public:
  /// Takes the bytes of one token (`byte_fallback`: a byte-fallback token's one byte); returns
  /// the text that is final now (possibly "").
  std::string push(std::string_view bytes, bool byte_fallback);

  /// Ends the text: returns what is held, an incomplete character as U+FFFD (one per token in a
  /// run of byte-fallback tokens). The assembler may then start a new text.
  std::string finish();

  /// Number of bytes held back, waiting for the rest of a character.
  size_t held_bytes() const { return held_.size() + run_.size(); }

 private:
  // Ends the run of byte-fallback tokens; returns the text of what it held.
  std::string close_run();

  /// Bytes of ordinary tokens not emitted: at most an incomplete character.
  std::string held_;
  /// Bytes of the current run of byte-fallback tokens not emitted: at most an incomplete
  /// character.
  std::string run_;
  /// The tokens whose bytes run_ holds.
  size_t run_tokens_ = 0;
  /// Whether a run of byte-fallback tokens is going on.
  bool in_run_ = false;
  /// Whether the current run can no longer be UTF-8 (each further token is one U+FFFD).
  bool run_failed_ = false;
};

/// Turns the ids of generated tokens into text as they come, emitting only whole UTF-8
/// characters, as text_assembler joins bytes (so the text of a stream is transformers' decode of
/// its ids). Every space is kept (the text continues the prompt verbatim), except the leading
/// space of the first token with text when it follows BOS and
/// tok.decode_strips_leading_space(): SentencePiece decoding and llama2.c's run.c
/// (`if (prev_token == 1 && piece[0] == ' ') piece++;`) drop it, so the text of an empty prompt
/// starts "Once", not " Once". One instance per stream; not thread-safe.
class incremental_detokenizer {
 public:
  /// Makes a detokenizer that asks `tok` for the bytes of each id; `preceding` is the id before
  /// the first one pushed (the prompt's last, BOS for an empty prompt), -1 when none.
  explicit incremental_detokenizer(std::shared_ptr<const tokenizer> tok, int32_t preceding = -1);

  /// Feeds one token; returns the text that is now safe to emit (possibly "").
  std::string push(int32_t id);

  /// Feeds several tokens in order; returns the text that is now safe to emit.
  std::string push(const std::vector<int32_t>& ids);

  /// The text that `push(id)` would return now, without pushing it: the text of an alternative
  /// token in this stream's context (log-probabilities report it).
  std::string peek(int32_t id) const;

  /// Ends the stream: returns what is held, an incomplete character as U+FFFD. The detokenizer
  /// may then start a new stream.
  std::string flush();

  /// Number of bytes held back, waiting for the rest of a character or of a run of byte tokens.
  size_t held_bytes() const { return text_.held_bytes(); }

 private:
  // The bytes of `id`, less the space that follows BOS.
  std::string bytes_of(int32_t id) const;

  std::shared_ptr<const tokenizer> tokenizer_;
  /// Bytes received but not emitted.
  text_assembler text_;
  /// The id before the next one pushed.
  int32_t previous_;
  /// True until a token with bytes was pushed.
  bool at_start_ = true;
};

/// Decodes the ids of a prompt as the user wrote it: the bytes of every token (control ids give
/// nothing) joined as text_assembler joins them, without the one leading space that the tokenizer's
/// dummy prefix put in front ("▁Once" shows as "Once"; only when tok.decode_strips_leading_space(),
/// so byte-level tokenizers keep it). Text generated after the prompt is appended
/// verbatim, so "prompt + continuation" is decode_prompt(prompt ids) followed by the output of an
/// incremental_detokenizer.
std::string decode_prompt(const tokenizer& tok, const std::vector<int32_t>& ids);

}  // namespace conveyor::tokenizers
