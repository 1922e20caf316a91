// The GGUF tokenizer: tokenizer.ggml.* read from the file, then llama.cpp's SPM tokenizer on the
// shared scored BPE, or its BPE tokenizer on the tokenizer.json pieces of tokenizers/hf/.
#include "tokenizers/gguf_tokenizer.hpp"

#include <array>
#include <filesystem>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.hpp"
#include "tokenizers/hf/added_tokens.hpp"
#include "tokenizers/hf/bpe.hpp"
#include "tokenizers/hf/byte_level.hpp"
#include "tokenizers/hf/pre_tokenizer.hpp"
#include "tokenizers/score_bpe.hpp"
#include "tokenizers/utf8.hpp"

namespace conveyor::tokenizers {

namespace {

using json = nlohmann::json;

constexpr std::string_view space_symbol = "\u2581";  // SentencePiece's "▁"

// -- pre-tokenizers -------------------------------------------------------------------------------

/// One of llama.cpp's BPE pre-tokenizers (src/llama-vocab.cpp): the regexes applied in turn, each
/// to the pieces of the one before (what matches and what lies between are pieces), and the
/// flags llama.cpp sets with it.
struct pre_tokenizer_spec {
  std::vector<const char*> regexes;
  /// A word that is a whole token is that token, merges or not (Llama 3).
  bool ignore_merges = false;
  /// add_bos_token's default.
  bool add_bos = false;
};

constexpr const char* llama3_regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* qwen2_regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* gpt2_regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";

/// The pre-tokenizer of tokenizer.ggml.pre `name`, or nullopt for one Conveyor does not have.
std::optional<pre_tokenizer_spec> pre_tokenizer_named(const std::string& name) {
  for (const char* n : {"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"})
    if (name == n) return pre_tokenizer_spec{{llama3_regex}, true, true};
  if (name == "dbrx" || name == "smaug-bpe") return pre_tokenizer_spec{{llama3_regex}};
  if (name == "qwen2" || name == "deepseek-r1-qwen" || name == "stablelm2")
    return pre_tokenizer_spec{{qwen2_regex}};
  if (name == "gpt-2" || name == "phi-2" || name == "mpt" || name == "olmo")
    return pre_tokenizer_spec{{gpt2_regex}};
  for (const char* n : {"smollm", "starcoder", "refact", "command-r", "codeshell"})
    if (name == n) return pre_tokenizer_spec{{"\\p{N}", gpt2_regex}};
  if (name == "default")
    return pre_tokenizer_spec{
        {"[\\p{P}\\$\\+<=>\\^~\\|]+", gpt2_regex, "\\p{N}+", "[0-9][0-9][0-9]"}};
  return std::nullopt;
}

constexpr const char* known_pre_tokenizers =
    "llama3, llama-v3, llama-bpe, falcon3, pixtral, dbrx, smaug-bpe, qwen2, deepseek-r1-qwen, "
    "stablelm2, gpt-2, phi-2, mpt, olmo, smollm, starcoder, refact, command-r, codeshell, "
    "default";

// -- shared pieces --------------------------------------------------------------------------------

gguf_token_type type_of(const gguf_vocabulary& vocab, size_t id) {
  if (vocab.token_types.empty()) return gguf_token_type::normal;
  const int32_t t = vocab.token_types[id];
  return t >= 1 && t <= 6 ? static_cast<gguf_token_type>(t) : gguf_token_type::undefined;
}

/// The byte of a byte token "<0xHH>", or nullopt.
std::optional<uint8_t> byte_of_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int high = digit(piece[3]);
  const int low = digit(piece[4]);
  if (high < 0 || low < 0) return std::nullopt;
  return static_cast<uint8_t>(high * 16 + low);
}

/// The tokens matched in the text before anything else: control, user-defined and unknown ones
/// (llama.cpp's special-token cache). Control and unknown ones decode to nothing.
hf::added_token_matcher special_matcher(const gguf_vocabulary& vocab) {
  std::vector<hf::added_token> tokens;
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    const auto t = type_of(vocab, id);
    if (t != gguf_token_type::control && t != gguf_token_type::user_defined &&
        t != gguf_token_type::unknown)
      continue;
    hf::added_token token;
    token.id = static_cast<int32_t>(id);
    token.content = vocab.tokens[id];
    token.special = t != gguf_token_type::user_defined;
    tokens.push_back(std::move(token));
  }
  return hf::added_token_matcher{std::move(tokens)};
}

/// What both kinds share: specials, the per-id decoding, BOS/EOS and what encode() adds.
struct common_parts {
  hf::added_token_matcher specials;
  std::vector<std::string> bytes_of_id;
  std::vector<bool> byte_fallback;
  int32_t bos = -1;
  int32_t eos = -1;
  bool add_bos = false;
  bool add_eos = false;
};

/// The text of one special-id key, checked against the vocabulary.
expected<int32_t> special_id(const std::optional<int64_t>& id, int32_t fallback, const char* key,
                             size_t size, const std::string& origin) {
  if (!id) return fallback < static_cast<int64_t>(size) ? fallback : -1;
  if (*id < 0 || *id >= static_cast<int64_t>(size))
    return make_error(ec::bad_file, origin + ": key 'tokenizer.ggml." + key + "': id " +
                                        std::to_string(*id) + " is outside the vocabulary of " +
                                        std::to_string(size) + " tokens");
  return static_cast<int32_t>(*id);
}

// -- the tokenizers -------------------------------------------------------------------------------

/// Encodes `text` the way both of llama.cpp's tokenizers do: invalid UTF-8 repaired to U+FFFD,
/// specials matched first, `plain(segment, after_special)` for the text between them.
template <class Plain>
expected<std::vector<int32_t>> encode_with(const common_parts& parts, std::string_view text,
                                           bool add_special, Plain&& plain) {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special && parts.add_bos && parts.bos >= 0) ids.push_back(parts.bos);
  std::string repaired;
  if (!valid_utf8(text)) {
    repaired.assign(text);
    text = repaired = drain_utf8(repaired, true);
  }
  expected<void> status;
  bool after_special = true;  // the start of the text counts as one
  parts.specials.split(text, [&](const hf::text_segment& segment) {
    if (!status) return;
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      after_special = true;
      return;
    }
    status = plain(segment.text, after_special, segment.offset == 0, ids);
    after_special = false;
  });
  if (!status) return status.error();
  if (add_special && parts.add_eos && parts.eos >= 0) ids.push_back(parts.eos);
  return ids;
}

class gguf_tokenizer_base : public tokenizer {
 public:
  explicit gguf_tokenizer_base(common_parts parts) : parts_(std::move(parts)) {}

  std::string token_bytes(int32_t id) const override {
    if (id < 0 || static_cast<size_t>(id) >= parts_.bytes_of_id.size()) return {};
    return parts_.bytes_of_id[static_cast<size_t>(id)];
  }
  bool is_byte_fallback(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < parts_.byte_fallback.size() &&
           parts_.byte_fallback[static_cast<size_t>(id)];
  }
  int32_t vocab_size() const override { return static_cast<int32_t>(parts_.bytes_of_id.size()); }
  int32_t bos_id() const override { return parts_.bos; }
  int32_t eos_id() const override { return parts_.eos; }

 protected:
  common_parts parts_;
};

/// tokenizer.ggml.model "llama": llama.cpp's SPM tokenizer.
class gguf_spm_tokenizer final : public gguf_tokenizer_base {
 public:
  gguf_spm_tokenizer(common_parts parts, score_bpe bpe, bool add_space_prefix)
      : gguf_tokenizer_base(std::move(parts)),
        bpe_(std::move(bpe)),
        add_space_prefix_(add_space_prefix) {}

  expected<std::vector<int32_t>> encode(std::string_view text, bool add_bos) const override {
    return encode_with(parts_, text, add_bos,
                       [&](std::string_view piece, bool after_special, bool,
                           std::vector<int32_t>& ids) -> expected<void> {
                         std::string escaped;
                         escaped.reserve(piece.size() + 8);
                         if (add_space_prefix_ && after_special) escaped += space_symbol;
                         for (char c : piece) {
                           if (c == ' ')
                             escaped += space_symbol;
                           else
                             escaped += c;
                         }
                         bpe_.encode(escaped, ids);
                         return {};
                       });
  }

  bool decode_strips_leading_space() const override { return add_space_prefix_; }

 private:
  score_bpe bpe_;
  bool add_space_prefix_;
};

/// tokenizer.ggml.model "gpt2": llama.cpp's BPE tokenizer.
class gguf_bpe_tokenizer final : public gguf_tokenizer_base {
 public:
  gguf_bpe_tokenizer(common_parts parts, hf::pre_tokenizer pre, hf::bpe_model bpe)
      : gguf_tokenizer_base(std::move(parts)), pre_(std::move(pre)), bpe_(std::move(bpe)) {}

  expected<std::vector<int32_t>> encode(std::string_view text, bool add_bos) const override {
    return encode_with(parts_, text, add_bos,
                       [&](std::string_view piece, bool, bool at_start,
                           std::vector<int32_t>& ids) -> expected<void> {
                         auto emit = [&](std::string_view word) { bpe_.encode_word(word, ids); };
                         return pre_.split(piece, at_start, emit);
                       });
  }

  bool decode_strips_leading_space() const override { return false; }

 private:
  hf::pre_tokenizer pre_;
  hf::bpe_model bpe_;
};

// -- building -------------------------------------------------------------------------------------

expected<common_parts> make_common(const gguf_vocabulary& vocab, bool spm,
                                   const std::string& origin) {
  const size_t size = vocab.tokens.size();
  common_parts parts;
  auto bos = special_id(vocab.bos_id, spm ? 1 : -1, "bos_token_id", size, origin);
  if (!bos) return bos.error();
  auto eos = special_id(vocab.eos_id, spm ? 2 : -1, "eos_token_id", size, origin);
  if (!eos) return eos.error();
  for (const auto& [id, key] : {std::pair{vocab.unk_id, "unknown_token_id"},
                                std::pair{vocab.padding_id, "padding_token_id"}})
    if (auto ok = special_id(id, -1, key, size, origin); !ok) return ok.error();
  parts.bos = *bos;
  parts.eos = *eos;
  parts.specials = special_matcher(vocab);
  parts.bytes_of_id.resize(size);
  parts.byte_fallback.resize(size);
  std::string bytes;
  for (size_t id = 0; id < size; ++id) {
    const std::string& text = vocab.tokens[id];
    switch (type_of(vocab, id)) {
      case gguf_token_type::normal:
        if (spm) {
          // "▁" back to a space.
          for (size_t pos = 0; pos < text.size();) {
            if (text.compare(pos, space_symbol.size(), space_symbol) == 0) {
              parts.bytes_of_id[id] += ' ';
              pos += space_symbol.size();
            } else {
              parts.bytes_of_id[id] += text[pos++];
            }
          }
        } else {
          parts.bytes_of_id[id] = hf::chars_to_bytes(text, bytes) ? bytes : text;
        }
        break;
      case gguf_token_type::user_defined:
        parts.bytes_of_id[id] = text;
        break;
      case gguf_token_type::byte:
        if (auto b = byte_of_piece(text)) {
          parts.bytes_of_id[id] = std::string(1, static_cast<char>(*b));
          parts.byte_fallback[id] = true;
        }
        break;
      default:  // control, unknown, unused and undefined tokens decode to nothing
        break;
    }
  }
  return parts;
}

expected<std::shared_ptr<const tokenizer>> make_spm(const gguf_vocabulary& vocab,
                                                    common_parts parts, const std::string& origin) {
  std::array<int32_t, 256> byte_ids;
  byte_ids.fill(-1);
  std::vector<bool> mergeable(vocab.tokens.size());
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    const auto t = type_of(vocab, id);
    if (t == gguf_token_type::byte) {
      if (auto b = byte_of_piece(vocab.tokens[id]); b && byte_ids[*b] < 0)
        byte_ids[*b] = static_cast<int32_t>(id);
    }
    mergeable[id] = t == gguf_token_type::normal || t == gguf_token_type::user_defined;
  }
  auto unk = special_id(vocab.unk_id, 0, "unknown_token_id", vocab.tokens.size(), origin);
  if (!unk) return unk.error();
  std::vector<float> scores = vocab.scores;
  scores.resize(vocab.tokens.size(), 0.0f);
  score_bpe bpe{vocab.tokens, scores, mergeable, byte_ids, *unk};
  parts.add_bos = vocab.add_bos.value_or(true);
  parts.add_eos = vocab.add_eos.value_or(false);
  return std::shared_ptr<const tokenizer>{std::make_shared<gguf_spm_tokenizer>(
      std::move(parts), std::move(bpe), vocab.add_space_prefix.value_or(true))};
}

expected<std::shared_ptr<const tokenizer>> make_bpe(const gguf_vocabulary& vocab,
                                                    common_parts parts, const std::string& origin) {
  auto spec = pre_tokenizer_named(vocab.pre);
  if (!spec)
    return make_error(ec::bad_file, origin + ": key 'tokenizer.ggml.pre': pre-tokenizer '" +
                                        vocab.pre +
                                        "' is not supported; supported: " + known_pre_tokenizers);
  json steps = json::array();
  for (const char* re : spec->regexes)
    steps.push_back({{"type", "Split"},
                     {"pattern", {{"Regex", re}}},
                     {"behavior", "Isolated"},
                     {"invert", false}});
  steps.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  auto pre = hf::pre_tokenizer::parse({{"type", "Sequence"}, {"pretokenizers", steps}},
                                      origin + ": tokenizer.ggml.pre '" + vocab.pre + "'");
  if (!pre) return pre.error();
  json tokens = json::object();
  for (size_t id = 0; id < vocab.tokens.size(); ++id)
    tokens[vocab.tokens[id]] = id;  // the last of two equal tokens wins, as in llama.cpp
  json model = {{"type", "BPE"},
                {"vocab", std::move(tokens)},
                {"merges", vocab.merges},
                {"ignore_merges", spec->ignore_merges}};
  auto bpe = hf::bpe_model::parse(model, true, origin + ": tokenizer.ggml.merges");
  if (!bpe) return bpe.error();
  parts.add_bos = vocab.add_bos.value_or(spec->add_bos);
  parts.add_eos = vocab.add_eos.value_or(false);
  return std::shared_ptr<const tokenizer>{
      std::make_shared<gguf_bpe_tokenizer>(std::move(parts), std::move(*pre), std::move(*bpe))};
}

/// The text of token `id` when it is one, else "".
std::string text_of(const gguf_vocabulary& vocab, const std::optional<int64_t>& id) {
  if (!id || *id < 0 || *id >= static_cast<int64_t>(vocab.tokens.size())) return {};
  return vocab.tokens[static_cast<size_t>(*id)];
}

}  // namespace

// -- reading --------------------------------------------------------------------------------------

expected<gguf_vocabulary> read_gguf_vocabulary(const gguf::gguf_file& file) {
  gguf_vocabulary v;
  auto model = file.string("tokenizer.ggml.model");
  if (!model) return model.error();
  v.model = std::move(*model);
  auto pre = file.optional_string("tokenizer.ggml.pre");
  if (!pre) return pre.error();
  if (*pre) v.pre = std::move(**pre);
  auto tokens = file.strings("tokenizer.ggml.tokens");
  if (!tokens) return tokens.error();
  v.tokens = std::move(*tokens);
  auto scores = file.optional_floats("tokenizer.ggml.scores");
  if (!scores) return scores.error();
  if (*scores) v.scores = std::move(**scores);
  auto types = file.optional_ints("tokenizer.ggml.token_type");
  if (!types) return types.error();
  if (*types) {
    v.token_types.reserve((*types)->size());
    for (int64_t t : **types)
      v.token_types.push_back(t >= 0 && t <= 6 ? static_cast<int32_t>(t) : 0);
  }
  auto merges = file.optional_strings("tokenizer.ggml.merges");
  if (!merges) return merges.error();
  if (*merges) v.merges = std::move(**merges);
  for (auto [key, out] : {std::pair{"tokenizer.ggml.bos_token_id", &v.bos_id},
                          std::pair{"tokenizer.ggml.eos_token_id", &v.eos_id},
                          std::pair{"tokenizer.ggml.unknown_token_id", &v.unk_id},
                          std::pair{"tokenizer.ggml.padding_token_id", &v.padding_id}}) {
    auto id = file.optional_integer(key);
    if (!id) return id.error();
    *out = *id;
  }
  for (auto [key, out] : {std::pair{"tokenizer.ggml.add_bos_token", &v.add_bos},
                          std::pair{"tokenizer.ggml.add_eos_token", &v.add_eos},
                          std::pair{"tokenizer.ggml.add_space_prefix", &v.add_space_prefix}}) {
    auto flag = file.optional_boolean(key);
    if (!flag) return flag.error();
    *out = *flag;
  }
  static const std::string template_key = "tokenizer.chat_template";
  for (const auto& [key, value] : file.metadata()) {
    if (key.compare(0, template_key.size(), template_key) != 0) continue;
    std::string name;
    if (key.size() == template_key.size())
      name = "default";
    else if (key[template_key.size()] == '.' && key.size() > template_key.size() + 1)
      name = key.substr(template_key.size() + 1);
    else
      continue;  // tokenizer.chat_templates: the list of names
    auto text = file.string(key);
    if (!text) return text.error();
    // "default" first, whatever the file's order.
    const auto at = name == "default" ? v.chat_templates.begin() : v.chat_templates.end();
    v.chat_templates.emplace(at, std::move(name), std::move(*text));
  }
  return v;
}

// -- building -------------------------------------------------------------------------------------

expected<std::shared_ptr<const tokenizer>> make_gguf_tokenizer(const gguf_vocabulary& vocab,
                                                               const std::string& origin) {
  const bool spm = vocab.model == "llama";
  if (!spm && vocab.model != "gpt2")
    return make_error(ec::bad_file, origin + ": key 'tokenizer.ggml.model': tokenizer '" +
                                        vocab.model + "' is not supported; supported: llama, gpt2");
  if (vocab.tokens.empty())
    return make_error(ec::bad_file, origin + ": key 'tokenizer.ggml.tokens' is empty");
  if (vocab.tokens.size() > (size_t{1} << 24))
    return make_error(ec::bad_file, origin + ": key 'tokenizer.ggml.tokens': " +
                                        std::to_string(vocab.tokens.size()) +
                                        " tokens, more than 16777216");
  for (const auto& [key, n] : {std::pair{"scores", vocab.scores.size()},
                               std::pair{"token_type", vocab.token_types.size()}})
    if (n != 0 && n != vocab.tokens.size())
      return make_error(ec::bad_file, origin + ": key 'tokenizer.ggml." + key + "' has " +
                                          std::to_string(n) + " entries for " +
                                          std::to_string(vocab.tokens.size()) + " tokens");
  auto parts = make_common(vocab, spm, origin);
  if (!parts) return parts.error();
  if (spm) return make_spm(vocab, std::move(*parts), origin);
  return make_bpe(vocab, std::move(*parts), origin);
}

expected<std::shared_ptr<const tokenizer>> load_gguf_tokenizer(const gguf::gguf_file& file) {
  auto vocab = read_gguf_vocabulary(file);
  if (!vocab) return vocab.error();
  return make_gguf_tokenizer(*vocab, file.path());
}

expected<std::shared_ptr<const tokenizer>> load_gguf_tokenizer(const std::string& path) {
  auto file = gguf::gguf_file::open(path);
  if (!file) return file.error();
  return load_gguf_tokenizer(**file);
}

tokenizer_config gguf_tokenizer_config(const gguf_vocabulary& vocab) {
  tokenizer_config config;
  const bool spm = vocab.model == "llama";
  config.bos_token = text_of(vocab, vocab.bos_id ? vocab.bos_id
                                    : spm        ? std::optional<int64_t>{1}
                                                 : std::nullopt);
  config.eos_token = text_of(vocab, vocab.eos_id ? vocab.eos_id
                                    : spm        ? std::optional<int64_t>{2}
                                                 : std::nullopt);
  config.unk_token = text_of(vocab, vocab.unk_id);
  config.pad_token = text_of(vocab, vocab.padding_id);
  config.add_bos_token = vocab.add_bos;
  config.add_eos_token = vocab.add_eos;
  config.chat_templates = vocab.chat_templates;
  return config;
}

expected<tokenizer_config> read_gguf_tokenizer_config(const std::string& path) {
  auto file = gguf::gguf_file::open(path);
  if (!file) return file.error();
  auto vocab = read_gguf_vocabulary(**file);
  if (!vocab) return vocab.error();
  return gguf_tokenizer_config(*vocab);
}

bool is_gguf_path(const std::string& path) {
  return std::filesystem::path{path}.extension() == ".gguf";
}

}  // namespace conveyor::tokenizers
