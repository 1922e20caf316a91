// GGUF model files (llama.cpp's format) of the Llama family: the shape, rotary parameters and end
// ids from the file's metadata, the weights tensor by tensor from its memory map (quantized
// matrices handed to the kernels as the file keeps them). Torch-free.
#pragma once

#include <memory>
#include <string>

#include "common/error.hpp"
#include "model/model_info.hpp"

namespace conveyor::model {

/// The architectures (general.architecture) a GGUF file may hold.
inline constexpr const char* supported_gguf_architectures = "llama, qwen2";

/// The tensor types a GGUF model may keep its weights in.
inline constexpr const char* supported_gguf_types = "F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K";

/// Whether `path` is to be read as a GGUF file: a regular file named *.gguf or starting with the
/// magic "GGUF".
bool is_gguf_file(const std::string& path);

/// Reads a GGUF file's metadata and tensor descriptions: the model's shape, end ids, name (the
/// file's stem) and main tensor type. Errors name the file and the key or tensor: an unsupported
/// architecture or tensor type, a missing key or tensor, a tensor whose shape disagrees with the
/// metadata, and every check of the reader (gguf/gguf_file.hpp).
expected<model_info> read_gguf_info(const std::string& path);

/// Loads a GGUF model, its file opened and checked once, its weights read tensor by tensor
/// (model/llama_source.hpp); `summary` as for load_model.
expected<std::unique_ptr<causal_lm>> load_gguf_model(const std::string& path,
                                                     const runtime_options& options,
                                                     std::string* summary = nullptr);

}  // namespace conveyor::model
