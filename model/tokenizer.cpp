// Choosing a tokenizer loader by file name.
#include "model/tokenizer.hpp"

#include <filesystem>

namespace conveyor::model {

expected<std::shared_ptr<const tokenizer>> load_tokenizer(const std::string& path) {
  const auto extension = std::filesystem::path{path}.extension().string();
  if (extension == ".model") return load_sentencepiece_tokenizer(path);
  if (extension == ".bin") return load_llama2c_tokenizer(path);
  return make_error(ec::bad_file, path + ": unknown tokenizer format '" + extension +
                                      "' (expected .model for SentencePiece or .bin for llama2.c)");
}

}  // namespace conveyor::model
