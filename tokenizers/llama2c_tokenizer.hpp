// The llama2.c vocabulary tokenizer: Conveyor's own byte-fallback BPE, written to give the same
// ids as SentencePiece on the same vocabulary.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "tokenizers/score_bpe.hpp"
#include "tokenizers/tokenizer.hpp"

namespace conveyor::tokenizers {

/// A byte-fallback BPE tokenizer over a llama2.c vocabulary. Ids 0, 1 and 2 are UNK, BOS and EOS;
/// the pieces "<0x00>".."<0xFF>" are the byte-fallback tokens; every other piece is a normal
/// piece that merges may produce. Immutable after construction.
class llama2c_tokenizer final : public tokenizer {
 public:
  // -- construction ------------------------------------------------------------------------------

  /// Builds a tokenizer from the pieces (the text of each id, "▁" stored as a space, as in the
  /// `.bin`) and their merge scores. Fails when the sizes differ, when there are fewer than 3
  /// pieces or when a byte-fallback piece is missing; `origin` (a file name) opens each message.
  static expected<std::shared_ptr<const llama2c_tokenizer>> make(std::vector<std::string> pieces,
                                                                 std::vector<float> scores,
                                                                 const std::string& origin);

  llama2c_tokenizer(const llama2c_tokenizer&) = delete;
  llama2c_tokenizer& operator=(const llama2c_tokenizer&) = delete;

  // -- tokenizer interface -----------------------------------------------------------------------

  /// Encodes `text`: normalize() it, split it into characters, merge the adjacent pair whose
  /// merged piece has the highest score (leftmost on ties) until no pair merges, then spell each
  /// symbol that is not a piece with byte-fallback tokens.
  expected<std::vector<int32_t>> encode(std::string_view text, bool add_bos) const override;

  /// Returns the bytes of `id` in generated text, or "" for control ids and ids out of range.
  std::string token_bytes(int32_t id) const override;

  /// Whether `id` is one of the pieces "<0x00>".."<0xFF>".
  bool is_byte_fallback(int32_t id) const override;

  /// Number of ids.
  int32_t vocab_size() const override { return static_cast<int32_t>(bytes_of_id_.size()); }

  /// Always 1, llama2.c's convention.
  int32_t bos_id() const override { return 1; }

  /// Always 2, llama2.c's convention.
  int32_t eos_id() const override { return 2; }

  // -- normalization -----------------------------------------------------------------------------

  /// Normalizes `text` as SentencePiece does for a model with the "identity" rule,
  /// add_dummy_prefix and remove_extra_whitespaces (tok512.model's normalizer_spec), with
  /// spaces kept as ' ' (the `.bin` stores "▁" as a space). See the definition for the rules.
  static std::string normalize(std::string_view text);

 private:
  llama2c_tokenizer(std::vector<std::string> pieces, std::vector<float> scores,
                    std::array<int32_t, 256> byte_ids);

  /// What token_bytes() returns, per id.
  std::vector<std::string> bytes_of_id_;
  /// What is_byte_fallback() returns, per id.
  std::vector<bool> byte_fallback_;
  /// The merges over the normal pieces (not control, not byte fallback), spaces as ' '.
  score_bpe bpe_;
};

}  // namespace conveyor::tokenizers
