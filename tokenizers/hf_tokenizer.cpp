// The Hugging Face tokenizer.json tokenizer: added tokens, normalizer, pre-tokenizer, BPE model,
// post-processor and decoder of tokenizers/hf/, composed as the tokenizers library runs them.
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "tokenizers/hf/added_tokens.hpp"
#include "tokenizers/hf/bpe.hpp"
#include "tokenizers/hf/decoder.hpp"
#include "tokenizers/hf/normalizer.hpp"
#include "tokenizers/hf/post_processor.hpp"
#include "tokenizers/hf/pre_tokenizer.hpp"
#include "tokenizers/tokenizer.hpp"
#include "tokenizers/tokenizer_config.hpp"
#include "tokenizers/utf8.hpp"

namespace conveyor::tokenizers {

namespace {

using json = nlohmann::json;

/// The components of one tokenizer.json; immutable, so encode() may run on many threads.
class hf_tokenizer final : public tokenizer {
 public:
  hf_tokenizer(hf::normalizer norm, hf::pre_tokenizer pre, hf::bpe_model bpe,
               std::vector<hf::added_token> added, hf::sequence_template templ, hf::decoder dec)
      : normalizer_(std::move(norm)),
        pre_tokenizer_(std::move(pre)),
        bpe_(std::move(bpe)),
        template_(std::move(templ)),
        decoder_(std::move(dec)) {
    std::vector<hf::added_token> raw;
    std::vector<hf::added_token> normalized;
    int32_t size = bpe_.size();
    for (const auto& t : added) size = std::max(size, t.id + 1);
    bytes_of_id_.resize(static_cast<size_t>(size));
    byte_fallback_.resize(static_cast<size_t>(size));
    for (int32_t id = 0; id < bpe_.size(); ++id) {
      bytes_of_id_[static_cast<size_t>(id)] = decoder_.token_bytes(bpe_.token_of(id));
      byte_fallback_[static_cast<size_t>(id)] = decoder_.is_byte_fallback(bpe_.token_of(id));
    }
    for (const auto& t : added) {
      bytes_of_id_[static_cast<size_t>(t.id)] = t.special ? "" : decoder_.token_bytes(t.content);
      byte_fallback_[static_cast<size_t>(t.id)] =
          !t.special && decoder_.is_byte_fallback(t.content);
      added_ids_.emplace(t.content, t.id);
      (t.normalized && !normalizer_.empty() ? normalized : raw).push_back(t);
    }
    raw_tokens_ = hf::added_token_matcher{std::move(raw)};
    normalized_tokens_ = hf::added_token_matcher{std::move(normalized)};
  }

  expected<std::vector<int32_t>> encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    if (add_bos) ids.insert(ids.end(), template_.prefix.begin(), template_.prefix.end());
    std::string repaired;
    if (!valid_utf8(text)) {
      // Invalid bytes become U+FFFD, as text decoded from bytes in Python would.
      repaired.assign(text);
      text = repaired = drain_utf8(repaired, true);
    }
    expected<void> status;  // the first error stops the encoding
    raw_tokens_.split(text, [&](const hf::text_segment& segment) {
      if (!status) return;
      if (segment.id >= 0) {
        ids.push_back(segment.id);
        return;
      }
      status = encode_plain(segment.text, segment.offset == 0, ids);
    });
    if (!status) return status.error();
    if (add_bos) ids.insert(ids.end(), template_.suffix.begin(), template_.suffix.end());
    return ids;
  }

  std::string token_bytes(int32_t id) const override {
    if (id < 0 || static_cast<size_t>(id) >= bytes_of_id_.size()) return {};
    return bytes_of_id_[static_cast<size_t>(id)];
  }

  bool is_byte_fallback(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < byte_fallback_.size() &&
           byte_fallback_[static_cast<size_t>(id)];
  }

  int32_t vocab_size() const override { return static_cast<int32_t>(bytes_of_id_.size()); }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  bool decode_strips_leading_space() const override { return decoder_.strips_leading_space(); }

  /// The id of a token's text: an added token first, then the model's vocabulary; -1 if none.
  int32_t id_of(const std::string& content) const {
    if (auto it = added_ids_.find(content); it != added_ids_.end()) return it->second;
    return bpe_.id_of(content);
  }

  void set_special_ids(int32_t bos, int32_t eos) {
    bos_id_ = bos;
    eos_id_ = eos;
  }

  void set_prefix(std::vector<int32_t> prefix) { template_.prefix = std::move(prefix); }

  const hf::sequence_template& sequence() const { return template_; }

 private:
  /// Normalizes a stretch between raw-matched added tokens, matches the normalized added tokens,
  /// pre-tokenizes and encodes each word.
  expected<void> encode_plain(std::string_view piece, bool at_start,
                              std::vector<int32_t>& ids) const {
    auto emit_word = [&](std::string_view word) { bpe_.encode_word(word, ids); };
    if (normalizer_.empty()) return pre_tokenizer_.split(piece, at_start, emit_word);
    std::string normalized{piece};
    if (auto ok = normalizer_.apply(normalized); !ok) return ok;
    if (normalized_tokens_.empty()) return pre_tokenizer_.split(normalized, at_start, emit_word);
    expected<void> status;
    normalized_tokens_.split(normalized, [&](const hf::text_segment& segment) {
      if (!status) return;
      if (segment.id >= 0)
        ids.push_back(segment.id);
      else
        status = pre_tokenizer_.split(segment.text, at_start && segment.offset == 0, emit_word);
    });
    return status;
  }

  hf::normalizer normalizer_;
  hf::pre_tokenizer pre_tokenizer_;
  hf::bpe_model bpe_;
  hf::sequence_template template_;
  hf::decoder decoder_;
  hf::added_token_matcher raw_tokens_;
  hf::added_token_matcher normalized_tokens_;
  std::unordered_map<std::string, int32_t> added_ids_;
  std::vector<std::string> bytes_of_id_;
  std::vector<bool> byte_fallback_;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
};

/// The first of `names` that the tokenizer knows, or -1.
int32_t first_known(const hf_tokenizer& tok, std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (auto id = tok.id_of(name); id >= 0) return id;
  return -1;
}

}  // namespace

std::string hf_tokenizer_file(const std::string& path) {
  std::error_code err;
  if (std::filesystem::is_directory(path, err))
    return (std::filesystem::path{path} / "tokenizer.json").string();
  return path;
}

expected<std::shared_ptr<const tokenizer>> load_hf_tokenizer(const std::string& path_or_dir) {
  const std::string path = hf_tokenizer_file(path_or_dir);
  std::ifstream in{path, std::ios::binary};
  if (!in) return make_error(ec::bad_file, path + ": no such file");
  std::ostringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, false);
  if (doc.is_discarded()) return make_error(ec::bad_file, path + ": not valid JSON");
  if (!doc.is_object()) return make_error(ec::bad_file, path + ": not a JSON object");
  for (const char* key : {"truncation", "padding"})
    if (doc.contains(key) && !doc[key].is_null())
      return make_error(ec::bad_file, path + ": '" + key + "' is not supported (must be null)");
  if (!doc.contains("model")) return make_error(ec::bad_file, path + ": no 'model'");
  const json null_value;
  const auto get = [&](const char* key) -> const json& {
    auto it = doc.find(key);
    return it == doc.end() ? null_value : *it;
  };
  auto norm = hf::normalizer::parse(get("normalizer"), path);
  if (!norm) return norm.error();
  auto pre = hf::pre_tokenizer::parse(get("pre_tokenizer"), path);
  if (!pre) return pre.error();
  auto bpe = hf::bpe_model::parse(doc["model"], pre->byte_level(), path);
  if (!bpe) return bpe.error();
  auto added = hf::parse_added_tokens(get("added_tokens"), path);
  if (!added) return added.error();
  auto templ = hf::parse_post_processor(get("post_processor"), path);
  if (!templ) return templ.error();
  auto dec = hf::decoder::parse(get("decoder"), path);
  if (!dec) return dec.error();
  auto tok = std::make_shared<hf_tokenizer>(std::move(*norm), std::move(*pre), std::move(*bpe),
                                            std::move(*added), std::move(*templ), std::move(*dec));
  for (int32_t id : tok->sequence().prefix)
    if (id < 0 || id >= tok->vocab_size())
      return make_error(ec::bad_file, path + ": post_processor id " + std::to_string(id) +
                                          " is outside the vocabulary");

  // tokenizer_config.json beside it names BOS and EOS; without one, the template's first
  // special token and the usual names stand in.
  const auto config_path =
      (std::filesystem::path{path}.parent_path() / "tokenizer_config.json").string();
  auto beside = tokenizer_config_beside(path);
  if (!beside) return beside.error();
  const std::optional<tokenizer_config>& config = *beside;
  int32_t bos = -1;
  int32_t eos = -1;
  if (config && !config->bos_token.empty()) {
    bos = tok->id_of(config->bos_token);
    if (bos < 0)
      return make_error(ec::bad_file, config_path + ": bos_token '" + config->bos_token +
                                          "' is not a token of " + path);
  }
  if (config && !config->eos_token.empty()) {
    eos = tok->id_of(config->eos_token);
    if (eos < 0)
      return make_error(ec::bad_file, config_path + ": eos_token '" + config->eos_token +
                                          "' is not a token of " + path);
  }
  if (bos < 0 && !tok->sequence().prefix.empty()) bos = tok->sequence().prefix.front();
  if (bos < 0) bos = first_known(*tok, {"<s>", "<|begin_of_text|>", "<|endoftext|>"});
  if (eos < 0)
    eos =
        first_known(*tok, {"</s>", "<|end_of_text|>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>"});
  tok->set_special_ids(bos, eos);
  // With no post-processor, tokenizer_config's add_bos_token decides.
  if (!tok->sequence().present && config && config->add_bos_token.value_or(false) && bos >= 0)
    tok->set_prefix({bos});
  return std::shared_ptr<const tokenizer>{std::move(tok)};
}

}  // namespace conveyor::tokenizers
