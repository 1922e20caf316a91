// The tokenizer of a GGUF file (llama.cpp's model files): its tokenizer.ggml.* vocabulary as
// llama.cpp's tokenizer runs it ("llama": SentencePiece's scored BPE with byte fallback; "gpt2":
// byte-level BPE behind the pre-tokenizer named by tokenizer.ggml.pre), its special tokens and
// its chat templates. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "tokenizers/tokenizer.hpp"
#include "tokenizers/tokenizer_config.hpp"

namespace conveyor::gguf {
class gguf_file;
}  // namespace conveyor::gguf

namespace conveyor::tokenizers {

/// The token types of tokenizer.ggml.token_type (llama.cpp's llama_token_type).
enum class gguf_token_type : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

/// What a GGUF file says of its tokenizer, as plain values (the tokenizer.* keys).
struct gguf_vocabulary {
  /// tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (byte-level BPE).
  std::string model;
  /// tokenizer.ggml.pre: the pre-tokenizer of a "gpt2" model; "default" when absent.
  std::string pre = "default";
  /// tokenizer.ggml.tokens: the text of each id ("▁" for a space in "llama" models, GPT-2's
  /// byte-level characters in "gpt2" ones; control and user-defined tokens as they are written).
  std::vector<std::string> tokens;
  /// tokenizer.ggml.scores: the merge score of each id (empty: all 0).
  std::vector<float> scores;
  /// tokenizer.ggml.token_type: each id's gguf_token_type number (empty: all normal).
  std::vector<int32_t> token_types;
  /// tokenizer.ggml.merges: "left right" pairs, best first ("gpt2" models).
  std::vector<std::string> merges;
  /// tokenizer.ggml.{bos,eos,unknown,padding}_token_id.
  std::optional<int64_t> bos_id;
  std::optional<int64_t> eos_id;
  std::optional<int64_t> unk_id;
  std::optional<int64_t> padding_id;
  /// tokenizer.ggml.add_bos_token / add_eos_token / add_space_prefix.
  std::optional<bool> add_bos;
  std::optional<bool> add_eos;
  std::optional<bool> add_space_prefix;
  /// tokenizer.chat_template (named "default", first) and tokenizer.chat_template.NAME (named
  /// NAME, in the file's order).
  std::vector<std::pair<std::string, std::string>> chat_templates;
};

/// Reads the tokenizer.* keys of `file`. Errors (ec::bad_file) name the file and the key: a key
/// of the wrong type, no tokenizer.ggml.model or tokenizer.ggml.tokens.
expected<gguf_vocabulary> read_gguf_vocabulary(const gguf::gguf_file& file);

/// Builds the tokenizer of `vocab` as llama.cpp runs it; `origin` (the file) opens each message.
/// Refuses (ec::bad_file, naming the key and value) a model other than "llama" and "gpt2", a
/// tokenizer.ggml.pre whose pre-tokenizer Conveyor does not have, lists of other sizes than the
/// tokens, special ids outside the vocabulary, merges of tokens the vocabulary lacks.
///
/// encode(text, add_bos) with `add_bos` adds the special tokens llama.cpp adds (BOS when
/// add_bos_token, default true for "llama" and Llama 3's pre-tokenizers; EOS when
/// add_eos_token) and always matches control, user-defined and unknown tokens in the text
/// (leftmost, longest first), as added tokens of a tokenizer.json are. A "llama" model puts its
/// space prefix (add_space_prefix, default true) before each stretch of text that starts the
/// text or follows such a token, as llama.cpp does.
expected<std::shared_ptr<const tokenizer>> make_gguf_tokenizer(const gguf_vocabulary& vocab,
                                                               const std::string& origin);

/// read_gguf_vocabulary() then make_gguf_tokenizer(), named by the file's path.
expected<std::shared_ptr<const tokenizer>> load_gguf_tokenizer(const gguf::gguf_file& file);

/// Opens `path` and loads its tokenizer.
expected<std::shared_ptr<const tokenizer>> load_gguf_tokenizer(const std::string& path);

/// What tokenizer_config.json's callers need, from the vocabulary: the BOS/EOS/UNK/padding texts,
/// add_bos_token/add_eos_token when the file has them, and the chat templates. Ids outside the
/// vocabulary give empty texts (make_gguf_tokenizer() refuses them).
tokenizer_config gguf_tokenizer_config(const gguf_vocabulary& vocab);

/// Reads the tokenizer_config of the GGUF file at `path` (errors name the file and key).
expected<tokenizer_config> read_gguf_tokenizer_config(const std::string& path);

/// Whether `path` names a GGUF file by its extension (".gguf").
bool is_gguf_path(const std::string& path);

}  // namespace conveyor::tokenizers
