// SentencePiece's BPE over a scored vocabulary: merge the adjacent pair whose merged piece scores
// highest until none merges, then spell what is not a piece with byte-fallback tokens. Shared by
// the llama2.c vocabulary and GGUF's "llama" (SentencePiece) vocabularies.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace conveyor::tokenizers {

/// The merge loop of SentencePiece's BPE model (and of llama.cpp's SPM tokenizer) over a fixed
/// vocabulary; immutable after construction, encode() is safe from many threads. Movable, not
/// copyable (its index views into its own pieces).
class score_bpe {
 public:
  /// `pieces[id]` is the text of each id as the encoded text spells it (the caller's choice of
  /// space symbol), `scores[id]` its merge score (same size); only ids with `mergeable[id]` are
  /// results of merges and final symbols (the first of two equal pieces wins). `byte_ids[b]` is
  /// the byte-fallback token of byte b; where it is -1, `unk_id` stands for the byte.
  score_bpe(std::vector<std::string> pieces, const std::vector<float>& scores,
            const std::vector<bool>& mergeable, const std::array<int32_t, 256>& byte_ids,
            int32_t unk_id = -1);

  score_bpe(score_bpe&&) = default;
  score_bpe& operator=(score_bpe&&) = default;
  score_bpe(const score_bpe&) = delete;
  score_bpe& operator=(const score_bpe&) = delete;

  /// Appends the ids of `text` (valid UTF-8, already normalized) to `out`: split into
  /// characters, merge the pair whose merged piece has the highest score (leftmost on ties) until
  /// no pair merges, then each symbol that is not a piece as the byte-fallback ids of its bytes.
  void encode(std::string_view text, std::vector<int32_t>& out) const;

  /// The id of a mergeable piece, or -1.
  int32_t id_of(std::string_view piece) const;

 private:
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::array<int32_t, 256> byte_ids_;
  int32_t unk_id_;
  /// Mergeable pieces by text; the keys view into `pieces_`, whose strings stay in place when
  /// the vector is moved.
  std::unordered_map<std::string_view, int32_t> ids_;
};

}  // namespace conveyor::tokenizers
