// The weights of the CPU's plain-loop network, built from a weight source tensor by tensor
// (model/llama_source.hpp): each matrix packed in the kernels' layout as it is read, into one
// block of huge pages in the order a step reads them, and its source memory let go before the
// next. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/error.hpp"
#include "kernels/huge_pages.hpp"
#include "kernels/packed_matmul.hpp"
#include "kernels/quant_matmul.hpp"
#include "model/llama_source.hpp"

namespace conveyor::model {

/// One matrix product of the network, y = x W, where W's columns may come in parts kept in
/// different formats side by side (q | k | v; gate | up).
class weight_product {
 public:
  /// y[m, out] = x[m, in] W (+ bias), or y += x W with `accumulate`; as packed_matrix::multiply.
  void multiply(const float* x, int64_t x_stride, int64_t m, float* y, int64_t y_stride,
                const float* bias = nullptr, bool accumulate = false) const;

  /// Whether the RMSNorm before the product is folded into its numbers (else the network
  /// multiplies the normalized inputs by the norm's weight).
  bool folded() const { return folded_; }

  /// Appends the columns of `m`.
  void add(kernels::packed_matrix m);
  void add(kernels::quantized_matrix m);

  /// The formats of the parts, for the start-up line: "bf16", "Q4_K", ...
  std::vector<std::string> formats() const;
  void set_folded(bool folded) { folded_ = folded; }

 private:
  struct part {
    std::variant<kernels::packed_matrix, kernels::quantized_matrix> matrix;
    int64_t column = 0;
  };
  std::vector<part> parts_;
  int64_t out_ = 0;
  bool folded_ = false;
};

/// The rows of the token embedding: float32, or the blocks of a quantized file.
class embedding_rows {
 public:
  /// Writes the `dim` numbers of token `id` to `out`.
  void row(int64_t id, float* out) const;
  int64_t dim = 0;
  std::vector<float> values;  ///< [vocab, dim] float32, unless quantized
  /// The blocks of each row of a quantized embedding.
  std::optional<kernels::quant_type> type;
  std::vector<uint8_t> blocks;
  int64_t row_bytes = 0;
};

/// Every weight of the plain-loop network.
struct llama_matrices {
  struct layer {
    weight_product wqkv, wo, w13, w2;
    std::vector<float> bqkv;  ///< q | k | v biases; empty without
    std::vector<float> rms_att, rms_ffn;
  };
  embedding_rows embedding;
  std::vector<layer> layers;
  weight_product classifier;
  std::vector<float> rms_final;
  /// Where the packed matrices keep their numbers.
  std::unique_ptr<kernels::huge_page_arena> arena;

  /// The quantized types of the matrices ("Q4_K", "Q6_K"), each once, in the order met.
  std::vector<std::string> quantized_types() const;
};

/// How the matrices are kept.
struct matrix_options {
  /// The format of matrices a file keeps in floats.
  kernels::weight_format format = kernels::weight_format::f32;
  /// Quantize the matrices a file keeps in floats to this type as they are read (those whose
  /// rows are not a whole number of blocks stay in `format`).
  std::optional<kernels::quant_type> quantize;
};

/// Reads `source` tensor by tensor into the network's matrices. Errors are the source's (they
/// name the file and the tensor).
expected<llama_matrices> build_llama_matrices(const llama_source& source,
                                              const matrix_options& options);

}  // namespace conveyor::model
