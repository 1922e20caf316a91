// tokenizer.json "model" of type BPE: the vocabulary, the merges by rank, byte fallback
// (<0xNN> pieces), the unknown token, and a per-thread cache of encoded words.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/error.hpp"

namespace conveyor::tokenizers::hf {

/// A BPE model as the tokenizers library runs it; immutable after parsing, encode_word() is safe
/// from many threads (each thread has its own cache and scratch space).
class bpe_model {
 public:
  /// Parses the "model" value. With `byte_level` the words given to encode_word() are raw bytes
  /// and each byte starts as the vocabulary's byte-level character for it (ByteLevel
  /// pre-tokenizer); otherwise words are text and each character starts as itself.
  static expected<bpe_model> parse(const nlohmann::json& value, bool byte_level,
                                   const std::string& origin);

  /// Appends the ids of one word to `out`.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  /// The id of a vocabulary token, or -1.
  int32_t id_of(const std::string& token) const;

  /// The token of `id` (empty for an id the vocabulary lacks).
  const std::string& token_of(int32_t id) const;

  /// One more than the largest id.
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }

  /// Whether the model maps unknown characters to <0xNN> pieces.
  bool byte_fallback() const { return byte_fallback_; }

 private:
  struct merge {
    int32_t rank;
    int32_t id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  /// The merges of a word without the cache.
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> tokens_;
  std::unordered_map<uint64_t, merge> merges_;
  /// Byte-level: the id of each byte's character; otherwise the id of each ASCII character. -1
  /// when the vocabulary lacks it.
  std::array<int32_t, 256> byte_ids_{};
  /// The id of each <0xNN> piece, -1 where missing.
  std::array<int32_t, 256> fallback_ids_{};
  /// Byte-level and ignore_merges: the vocabulary keyed by raw bytes.
  std::unordered_map<std::string, int32_t> raw_vocab_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool byte_level_ = false;
  /// Distinguishes instances in the per-thread caches.
  uint64_t instance_ = 0;
};

}  // namespace conveyor::tokenizers::hf
