// tokenizer.json "decoder": how a token becomes the bytes of generated text (ByteLevel,
// Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence), applied per token so that the
// incremental detokenizer can stream.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/error.hpp"

namespace conveyor::tokenizers::hf {

/// The per-token part of a decoder chain, plus whether the whole decode drops one leading space
/// (Strip after Fuse, or Metaspace with a prepend scheme); immutable.
class decoder {
 public:
  /// Parses the "decoder" value; null is refused (the tokenizers library would join tokens with
  /// spaces, which generated text cannot stream). Errors name `origin` and the type.
  static expected<decoder> parse(const nlohmann::json& value, const std::string& origin);

  /// The bytes a token stands for in generated text.
  std::string token_bytes(const std::string& token) const;

  /// Whether a ByteFallback step turns `token` into its byte (<0xE2>).
  bool is_byte_fallback(const std::string& token) const;

  /// Whether decoding drops one leading space of the text (SentencePiece's dummy prefix).
  bool strips_leading_space() const { return strips_leading_space_; }

 private:
  enum class kind { byte_level, replace, byte_fallback, metaspace };
  struct step {
    kind what;
    std::string from;
    std::string to;
  };
  static expected<void> add(const nlohmann::json& value, const std::string& origin, decoder& out);
  // token_bytes(), telling in `byte_fallback` whether a ByteFallback step made the byte.
  std::string decode(const std::string& token, bool& byte_fallback) const;
  std::vector<step> steps_;
  bool fused_ = false;
  bool strips_leading_space_ = false;
};

}  // namespace conveyor::tokenizers::hf
