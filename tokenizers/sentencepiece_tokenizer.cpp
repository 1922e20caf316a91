// The SentencePiece tokenizer: libsentencepiece through the shim library of tokenizers/spm_shim/,
// opened with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) so that its bundled protobuf never meets the
// one libtorch loads (see tokenizers/CMakeLists.txt).
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <type_traits>
#include <utility>

#include "common/install_dirs.hpp"
#include "tokenizers/spm_shim/sentencepiece_shim.hpp"
#include "tokenizers/tokenizer.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CONVEYOR_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CONVEYOR_SANITIZED 1
#endif
#endif
#ifndef CONVEYOR_SANITIZED
#define CONVEYOR_SANITIZED 0
#endif

namespace conveyor::tokenizers {

namespace {

/// SentencePiece's space symbol "▁" (U+2581).
constexpr std::string_view spm_space_symbol = "\u2581";  // SentencePiece's "▁"

/// The functions of the shim library.
struct shim_api {
  decltype(&conveyor_spm_load) load = nullptr;
  decltype(&conveyor_spm_free) free = nullptr;
  decltype(&conveyor_spm_vocab_size) vocab_size = nullptr;
  decltype(&conveyor_spm_encode) encode = nullptr;
  decltype(&conveyor_spm_piece) piece = nullptr;
  decltype(&conveyor_spm_piece_kind) piece_kind = nullptr;
  decltype(&conveyor_spm_bos_id) bos_id = nullptr;
  decltype(&conveyor_spm_eos_id) eos_id = nullptr;
};

/// The shim's file: $CONVEYOR_SPM_SHIM when set, else PREFIX/lib/conveyor/ (where the build tree
/// puts it too), else its bare name for the dynamic linker's search (LD_LIBRARY_PATH, ...).
std::string shim_path() {
  const char* from_env = std::getenv("CONVEYOR_SPM_SHIM");
  if (from_env != nullptr && *from_env != '\0') return from_env;
  const auto dir = private_library_dir();
  const std::string name = CONVEYOR_SPM_SHIM_NAME;
  std::error_code err;
  if (!dir.empty() && std::filesystem::exists(dir + "/" + name, err)) return dir + "/" + name;
  return name;
}

/// Opens the shim (see shim_path).
expected<shim_api> open_shim() {
  const std::string path = shim_path();
#if CONVEYOR_SANITIZED
  // AddressSanitizer and ThreadSanitizer refuse RTLD_DEEPBIND. A link-map namespace of the shim's own
  // (dlmopen) keeps the two protobufs apart as well; the shim is built without sanitizers and
  // talks C, so nothing allocated on one side is freed on the other.
  void* library = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
#else
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
#endif
  if (library == nullptr)
    return make_error(ec::model_failure,
                      path + ": cannot load the SentencePiece shim: " + dlerror());
  shim_api api;
  std::string missing;
  const auto bind = [&](auto& function, const char* name) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, name));
    if (function == nullptr) missing += std::string{missing.empty() ? "" : ", "} + name;
  };
  bind(api.load, "conveyor_spm_load");
  bind(api.free, "conveyor_spm_free");
  bind(api.vocab_size, "conveyor_spm_vocab_size");
  bind(api.encode, "conveyor_spm_encode");
  bind(api.piece, "conveyor_spm_piece");
  bind(api.piece_kind, "conveyor_spm_piece_kind");
  bind(api.bos_id, "conveyor_spm_bos_id");
  bind(api.eos_id, "conveyor_spm_eos_id");
  // The library stays loaded for the life of the process.
  if (!missing.empty())
    return make_error(ec::model_failure, path + ": the SentencePiece shim lacks " + missing);
  return api;
}

/// The shim, opened on first use.
const expected<shim_api>& shim() {
  static const expected<shim_api> api = open_shim();
  return api;
}

/// A tokenizer over a loaded SentencePiece model. The processor's const methods, which are all
/// the shim calls after loading, are safe to call from many threads.
class sentencepiece_tokenizer final : public tokenizer {
 public:
  sentencepiece_tokenizer(const shim_api& api, void* processor) : api_(api), processor_(processor) {
    const int32_t size = api_.vocab_size(processor_);
    bytes_of_id_.resize(static_cast<size_t>(size));
    byte_fallback_.resize(static_cast<size_t>(size));
    for (int32_t id = 0; id < size; ++id) {
      bytes_of_id_[id] = bytes_of(id);
      byte_fallback_[id] = api_.piece_kind(processor_, id) == 1;
    }
    bos_id_ = api_.bos_id(processor_);
    eos_id_ = api_.eos_id(processor_);
  }

  sentencepiece_tokenizer(const sentencepiece_tokenizer&) = delete;
  sentencepiece_tokenizer& operator=(const sentencepiece_tokenizer&) = delete;

  ~sentencepiece_tokenizer() override { api_.free(processor_); }

  expected<std::vector<int32_t>> encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(bos_id_);
    const size_t offset = ids.size();
    // A first guess that fits ordinary text; the shim says how much room it needs when not.
    ids.resize(offset + text.size() + 2);
    for (;;) {
      const auto capacity = static_cast<int32_t>(ids.size() - offset);
      // Fails only on a processor that is not loaded, which the loader rules out.
      const int32_t needed =
          api_.encode(processor_, text.data(), text.size(), ids.data() + offset, capacity);
      if (needed <= capacity) {
        ids.resize(offset + static_cast<size_t>(std::max(needed, 0)));
        return ids;
      }
      ids.resize(offset + static_cast<size_t>(needed));
    }
  }

  std::string token_bytes(int32_t id) const override {
    if (id < 0 || static_cast<size_t>(id) >= bytes_of_id_.size()) return {};
    return bytes_of_id_[id];
  }

  bool is_byte_fallback(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < byte_fallback_.size() && byte_fallback_[id];
  }

  int32_t vocab_size() const override { return static_cast<int32_t>(bytes_of_id_.size()); }

  int32_t bos_id() const override { return bos_id_; }

  int32_t eos_id() const override { return eos_id_; }

 private:
  /// The bytes of `id` in generated text: the byte of a byte piece ("<0xHH>"), nothing for
  /// control and unknown pieces, the piece with "▁" as a space for the others.
  std::string bytes_of(int32_t id) const {
    const int32_t kind = api_.piece_kind(processor_, id);
    if (kind == 2) return {};
    std::string piece(64, '\0');
    int32_t length = api_.piece(processor_, id, piece.data(), static_cast<int32_t>(piece.size()));
    if (length > static_cast<int32_t>(piece.size())) {
      piece.resize(static_cast<size_t>(length));
      length = api_.piece(processor_, id, piece.data(), length);
    }
    piece.resize(static_cast<size_t>(std::max(length, 0)));
    if (kind == 1)
      return std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
    std::string out;
    for (size_t pos = 0; pos < piece.size();) {
      if (piece.compare(pos, spm_space_symbol.size(), spm_space_symbol) == 0) {
        out += ' ';
        pos += spm_space_symbol.size();
      } else {
        out += piece[pos++];
      }
    }
    return out;
  }

  shim_api api_;
  void* processor_;
  std::vector<std::string> bytes_of_id_;
  std::vector<bool> byte_fallback_;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
};

}  // namespace

expected<std::shared_ptr<const tokenizer>> load_sentencepiece_tokenizer(const std::string& path) {
  std::error_code err;
  if (!std::filesystem::is_regular_file(path, err))
    return make_error(ec::bad_file, path + ": no such file");
  if (std::filesystem::file_size(path, err) == 0 && !err)
    return make_error(ec::bad_file, path + ": empty file");
  const auto& api = shim();
  if (!api) return api.error();
  char message[512] = "";
  void* processor = api->load(path.c_str(), message, sizeof message);
  if (processor == nullptr)
    return make_error(ec::bad_file, path + ": not a SentencePiece model (" + message + ")");
  return std::shared_ptr<const tokenizer>{
      std::make_shared<sentencepiece_tokenizer>(*api, processor)};
}

}  // namespace conveyor::tokenizers
