// Token ids back to text: the incremental detokenizer of a generation stream, and the decoding
// of a prompt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/tokenizer.hpp"

namespace conveyor::model {

/// Turns the ids of generated tokens into text as they come, emitting only whole UTF-8
/// characters: bytes of a character that byte-fallback tokens split stay held until the
/// character completes. Every space is kept (the text continues the prompt verbatim), except
/// the leading space of the first token with text when it follows BOS and
/// tok.decode_strips_leading_space(): SentencePiece decoding and llama2.c's run.c
/// (`if (prev_token == 1 && piece[0] == ' ') piece++;`) drop it, so the text of an empty prompt
/// starts "Once", not " Once". Invalid bytes become U+FFFD, one per maximal invalid subpart. One
/// instance per stream; not thread-safe.
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

  /// Number of bytes held back, waiting for the rest of a character.
  size_t held_bytes() const { return held_.size(); }

 private:
  // Appends the bytes of `id` to held_, less the space that follows BOS.
  void take(int32_t id);
  // The bytes `take(id)` appends.
  std::string bytes_of(int32_t id) const;

  std::shared_ptr<const tokenizer> tokenizer_;
  /// Bytes received but not emitted: at most an incomplete character.
  std::string held_;
  /// The id before the next one pushed.
  int32_t previous_;
  /// True until a token with bytes was pushed.
  bool at_start_ = true;
};

/// Decodes the ids of a prompt as the user wrote it: the bytes of every token (control ids give
/// nothing), invalid UTF-8 as U+FFFD, without the one leading space that the tokenizer's dummy
/// prefix put in front ("▁Once" shows as "Once"; only when tok.decode_strips_leading_space(),
/// so byte-level tokenizers keep it). Text generated after the prompt is appended
/// verbatim, so "prompt + continuation" is decode_prompt(prompt ids) followed by the output of an
/// incremental_detokenizer.
std::string decode_prompt(const tokenizer& tok, const std::vector<int32_t>& ids);

}  // namespace conveyor::model
