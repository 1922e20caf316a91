// Tokenizers: text to token ids and token ids back to bytes, torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace conveyor::tokenizers {

/// Turns text into token ids and ids into the bytes they stand for. Implementations are
/// immutable after loading, so one instance may be shared by many threads.
class tokenizer {
 public:
  virtual ~tokenizer() = default;

  /// Encodes `text` (UTF-8), with a leading BOS id when `add_bos`. Fails (ec::bad_request, the
  /// message naming the tokenizer's file and component) only on a text the tokenizer cannot
  /// finish, e.g. one on which a pre-tokenizer regex of a tokenizer.json backtracks beyond its
  /// budget: never ids of a different tokenization.
  virtual expected<std::vector<int32_t>> encode(std::string_view text, bool add_bos) const = 0;

  /// Returns the raw bytes that token `id` stands for in generated text: byte-fallback tokens
  /// (<0x0A>) give their one byte, "▁" gives a space, control tokens (BOS, EOS, UNK) give "".
  /// A single byte-fallback token may be half of a UTF-8 character.
  virtual std::string token_bytes(int32_t id) const = 0;

  /// Whether `id` is a byte-fallback token (<0xE2>): decoding takes a run of them together, and
  /// a run whose bytes are not UTF-8 as a whole gives one U+FFFD per token (the ByteFallback
  /// decoder of the tokenizers library, which transformers' decode runs). False for tokenizers
  /// without byte fallback: byte-level BPE decodes all bytes together, one U+FFFD per maximal
  /// invalid subpart.
  virtual bool is_byte_fallback(int32_t id) const {
    (void)id;
    return false;
  }

  /// Number of ids.
  virtual int32_t vocab_size() const = 0;

  /// Id of the beginning-of-sequence token.
  virtual int32_t bos_id() const = 0;

  /// Id of the end-of-sequence token.
  virtual int32_t eos_id() const = 0;

  /// Whether decoding a prompt drops one leading space (the dummy prefix "▁" of SentencePiece
  /// and of tokenizer.json's Metaspace/Strip decoders); byte-level tokenizers keep it.
  virtual bool decode_strips_leading_space() const { return true; }
};

/// Loads a SentencePiece model (`.model`) through libsentencepiece.
expected<std::shared_ptr<const tokenizer>> load_sentencepiece_tokenizer(const std::string& path);

/// Loads a llama2.c vocabulary (`.bin`) and encodes with Conveyor's own byte-fallback BPE.
expected<std::shared_ptr<const tokenizer>> load_llama2c_tokenizer(const std::string& path);

/// Loads a Hugging Face `tokenizer.json` (a file, or a directory holding one) with the
/// tokenizer_config.json beside it when present (BOS/EOS names). Supports BPE models (byte-level
/// as GPT-2, Llama 3, Qwen2; byte fallback with Metaspace as Llama 2, Mistral); refuses anything
/// else naming the file and the component. `encode(text, add_bos)` applies the post-processor's
/// template (TemplateProcessing) when `add_bos`, and matches added tokens in the text always.
expected<std::shared_ptr<const tokenizer>> load_hf_tokenizer(const std::string& path_or_dir);

/// `path` itself, or `path`/tokenizer.json when `path` is a directory.
std::string hf_tokenizer_file(const std::string& path);

/// Loads a tokenizer by file name: `.model` is SentencePiece, `.bin` is llama2.c, `.json` (or a
/// directory holding tokenizer.json) is a Hugging Face tokenizer.json, `.gguf` is the vocabulary
/// of a GGUF model file (gguf_tokenizer.hpp).
expected<std::shared_ptr<const tokenizer>> load_tokenizer(const std::string& path);

}  // namespace conveyor::tokenizers
