// The weights of a Hugging Face model directory as a weight source (model/llama_source.hpp), or
// read whole into llama_weights: the tensors of its safetensors files checked against
// config.json, converted to float32, and the q and k rows of each head permuted from Hugging
// Face's layout to llama2.c's so that one rotary code serves both. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/error.hpp"
#include "model/checkpoint.hpp"
#include "model/llama_source.hpp"
#include "model/model_info.hpp"

namespace conveyor::model {

/// How a directory's weights were read.
struct hf_load_stats {
  /// Bytes of tensor data in the safetensors files.
  int64_t file_bytes = 0;
  /// The dtype most bytes are stored in ("F32", "F16", "BF16").
  std::string dtype;
  /// Where the weights are (model.safetensors or the index of the shards).
  std::string where;
};

/// The weights of the directory `info` describes, tensor by tensor (model/llama_source.hpp):
/// its safetensors files opened and their headers checked; each read checks the tensor's shape
/// against config.json. `stats` as for load_hf_weights.
expected<std::unique_ptr<llama_source>> open_hf_source(const model_info& info,
                                                       hf_load_stats* stats = nullptr);

/// Reads the weights of the directory `info` describes (from read_hf_config). Errors name the
/// file and the tensor: a missing tensor, a shape that disagrees with config.json, an
/// unsupported dtype, and every check of the safetensors reader.
expected<llama_weights> load_hf_weights(const model_info& info, hf_load_stats* stats = nullptr);

/// Hugging Face's rows of q or k ([heads * head_size, cols]: the two halves of each head turn
/// together) to llama2.c's (adjacent pairs turn), in place.
void adjacent_pairs_from_halves(float* rows, int64_t heads, int64_t head_size, int64_t cols);

/// The same for rows of `row_bytes` bytes each (a quantized file's rows of blocks).
void adjacent_pairs_from_halves(uint8_t* rows, int64_t heads, int64_t head_size, int64_t row_bytes);

}  // namespace conveyor::model
