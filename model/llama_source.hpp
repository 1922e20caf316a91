// Where a Llama network's weights come from, one tensor at a time: a llama2.c checkpoint or
// synthetic weights in memory, a Hugging Face directory's safetensors, a GGUF file. The CPU
// network packs each tensor as it is read and lets go of it before the next, so that loading
// never holds a second full-size copy of the model. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "kernels/quant_blocks.hpp"
#include "model/checkpoint.hpp"

namespace conveyor::model {

/// The tensors of a Llama network. Per layer: rms_att to w3; once: the others.
enum class llama_tensor : uint8_t {
  embedding,   ///< [vocab, dim]
  rms_att,     ///< [dim]
  wq,          ///< [q_dim, dim]
  wk,          ///< [kv_dim, dim]
  wv,          ///< [kv_dim, dim]
  bq,          ///< [q_dim]; only with shape.qkv_bias
  bk,          ///< [kv_dim]; only with shape.qkv_bias
  bv,          ///< [kv_dim]; only with shape.qkv_bias
  wo,          ///< [dim, q_dim]
  rms_ffn,     ///< [dim]
  w1,          ///< [hidden, dim]
  w2,          ///< [dim, hidden]
  w3,          ///< [hidden, dim]
  rms_final,   ///< [dim]
  classifier,  ///< [vocab, dim]; the embedding's numbers when shape.shared_classifier
};

/// A tensor's name in messages ("wq", "classifier", ...).
const char* tensor_name(llama_tensor t);

/// Rows and columns of tensor `t` for shape `s` ([out, in] for a matrix, 1 row for a vector).
std::pair<int64_t, int64_t> tensor_dims(const llama_shape& s, llama_tensor t);

/// A matrix kept in quantized blocks by its file: `rows` rows of `cols` numbers, each row
/// cols / block blocks of `type` (ggml's layout), row-major.
struct quantized_rows {
  kernels::quant_type type = kernels::quant_type::q8_0;
  const void* data = nullptr;
  /// The blocks when the source had to reorder rows (data points into it); else empty and
  /// data points into the source's memory.
  std::vector<uint8_t> owned;
};

/// The weights of one Llama network, tensor by tensor. Matrices are [out, in] row-major (y = W x)
/// with the q and k rows of each head in llama2.c's order (adjacent pairs turn together): each
/// source reorders what its file keeps otherwise.
class llama_source {
 public:
  virtual ~llama_source() = default;

  virtual const llama_shape& shape() const = 0;

  /// Reads tensor `t` of `layer` (0 for the tensors the network has once) as float32 into `out`
  /// (tensor_dims' rows x cols). Errors name the file and the tensor.
  virtual error read(llama_tensor t, int32_t layer, float* out) const = 0;

  /// The type of a matrix its file keeps quantized; nullopt for one kept in floats.
  virtual std::optional<kernels::quant_type> quantized_type(llama_tensor t, int32_t layer) const {
    (void)t;
    (void)layer;
    return std::nullopt;
  }

  /// The blocks of a matrix its file keeps quantized; nullopt for one kept in floats.
  virtual std::optional<quantized_rows> quantized(llama_tensor t, int32_t layer) const {
    (void)t;
    (void)layer;
    return std::nullopt;
  }

  /// Lets go of the memory of tensor `t` of `layer`: the network has what it needs of it.
  virtual void release(llama_tensor t, int32_t layer) const {
    (void)t;
    (void)layer;
  }

  /// True for random weights: the model has no real end token.
  virtual bool synthetic() const { return false; }

  /// The ids that end a sequence; empty means the tokenizer's BOS and EOS.
  virtual std::vector<int32_t> end_ids() const { return {}; }
};

/// A source over weights in memory (borrowed: `w` outlives it).
std::unique_ptr<llama_source> source_of(const llama_weights& w);

/// Every tensor of `source` read into float32 arrays: what the torch-operation network and the
/// llama2.c-style consumers take.
expected<llama_weights> read_all(const llama_source& source);

}  // namespace conveyor::model
