// Choosing a tokenizer loader by file name.
#include "tokenizers/tokenizer.hpp"

#include <filesystem>

#include "tokenizers/gguf_tokenizer.hpp"

namespace conveyor::tokenizers {

expected<std::shared_ptr<const tokenizer>> load_tokenizer(const std::string& path) {
  std::error_code err;
  if (std::filesystem::is_directory(path, err)) {
    if (std::filesystem::is_regular_file(hf_tokenizer_file(path), err))
      return load_hf_tokenizer(path);
    return make_error(ec::bad_file, path + ": a directory without tokenizer.json");
  }
  const auto extension = std::filesystem::path{path}.extension().string();
  if (extension == ".json") return load_hf_tokenizer(path);
  if (extension == ".model") return load_sentencepiece_tokenizer(path);
  if (extension == ".bin") return load_llama2c_tokenizer(path);
  if (extension == ".gguf") return load_gguf_tokenizer(path);
  return make_error(ec::bad_file, path + ": unknown tokenizer format '" + extension +
                                      "' (expected .model for SentencePiece, .bin for llama2.c, "
                                      "tokenizer.json for Hugging Face or .gguf)");
}

}  // namespace conveyor::tokenizers
