// Building the plain-loop network's weights from a source.
#include "model/llama_matrices.hpp"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <utility>

namespace conveyor::model {

namespace {

using kernels::huge_page_arena;
using kernels::packed_matrix;

// The matrices of one product: its parts (stacked as the rows of W^T) and the RMSNorm before it.
struct product_plan {
  std::vector<llama_tensor> parts;
  std::optional<llama_tensor> norm;
};

// Builds the products of one source, in the order a step reads them.
class builder {
 public:
  builder(const llama_source& source, const matrix_options& options)
      : source_(source), options_(options), s_(source.shape()) {}

  expected<llama_matrices> build() {
    llama_matrices m;
    m.arena = std::make_unique<huge_page_arena>(arena_bytes());
    arena_ = m.arena.get();
    if (auto err = embedding(m.embedding)) return err;
    for (int32_t l = 0; l < s_.n_layers; ++l) {
      llama_matrices::layer lw;
      if (auto err = vector(llama_tensor::rms_att, l, lw.rms_att)) return err;
      if (auto err = vector(llama_tensor::rms_ffn, l, lw.rms_ffn)) return err;
      if (s_.qkv_bias) {
        std::vector<float> b;
        for (auto t : {llama_tensor::bq, llama_tensor::bk, llama_tensor::bv}) {
          if (auto err = vector(t, l, b)) return err;
          lw.bqkv.insert(lw.bqkv.end(), b.begin(), b.end());
        }
      }
      if (auto err = product(qkv_plan(), l, lw.rms_att, lw.wqkv)) return err;
      if (auto err = product({{llama_tensor::wo}, {}}, l, {}, lw.wo)) return err;
      if (auto err = product(w13_plan(), l, lw.rms_ffn, lw.w13)) return err;
      if (auto err = product({{llama_tensor::w2}, {}}, l, {}, lw.w2)) return err;
      m.layers.push_back(std::move(lw));
    }
    if (auto err = vector(llama_tensor::rms_final, 0, m.rms_final)) return err;
    if (auto err = product({{llama_tensor::classifier}, llama_tensor::rms_final}, 0, m.rms_final,
                           m.classifier))
      return err;
    return m;
  }

 private:
  static product_plan qkv_plan() {
    return {{llama_tensor::wq, llama_tensor::wk, llama_tensor::wv}, llama_tensor::rms_att};
  }
  static product_plan w13_plan() {
    return {{llama_tensor::w1, llama_tensor::w3}, llama_tensor::rms_ffn};
  }

  // How each part of a product is kept: quantized (the file's blocks, or quantized as read) or
  // nullopt for the float format. One quantized part keeps the whole product's norm unfolded.
  std::vector<std::optional<kernels::quant_type>> kinds(const product_plan& plan,
                                                        int32_t layer) const {
    std::vector<std::optional<kernels::quant_type>> out;
    for (auto t : plan.parts) {
      auto stored = source_.quantized_type(t, layer);
      const int64_t in = tensor_dims(s_, t).second;
      if (!stored && options_.quantize &&
          in % kernels::quant_block_elements(*options_.quantize) == 0)
        stored = options_.quantize;
      out.push_back(stored);
    }
    return out;
  }

  static bool any(const std::vector<std::optional<kernels::quant_type>>& kinds) {
    for (const auto& k : kinds)
      if (k) return true;
    return false;
  }

  // The bytes every product takes packed, each piece rounded as the arena rounds it.
  size_t arena_bytes() const {
    size_t bytes = 0;
    auto count = [&](const product_plan& plan, int32_t layer) {
      const auto k = kinds(plan, layer);
      if (!any(k)) {
        int64_t out = 0, in = 0;
        for (auto t : plan.parts) {
          out += tensor_dims(s_, t).first;
          in = tensor_dims(s_, t).second;
        }
        bytes +=
            huge_page_arena::rounded(size_t(packed_matrix::packed_bytes(in, out, options_.format)));
        return;
      }
      for (size_t i = 0; i < plan.parts.size(); ++i) {
        const auto [out, in] = tensor_dims(s_, plan.parts[i]);
        bytes += huge_page_arena::rounded(
            size_t(k[i] ? kernels::quantized_matrix::packed_bytes(*k[i], in, out)
                        : packed_matrix::packed_bytes(in, out, options_.format)));
      }
    };
    for (int32_t l = 0; l < s_.n_layers; ++l)
      for (const auto& plan : {qkv_plan(), product_plan{{llama_tensor::wo}, {}}, w13_plan(),
                               product_plan{{llama_tensor::w2}, {}}})
        count(plan, l);
    count({{llama_tensor::classifier}, llama_tensor::rms_final}, 0);
    return bytes;
  }

  // The token embedding: the file's blocks when it keeps them quantized, else float32.
  error embedding(embedding_rows& e) {
    const auto [vocab, dim] = tensor_dims(s_, llama_tensor::embedding);
    e.dim = dim;
    if (auto rows = source_.quantized(llama_tensor::embedding, 0)) {
      e.type = rows->type;
      e.row_bytes =
          dim / kernels::quant_block_elements(rows->type) * kernels::quant_block_bytes(rows->type);
      const auto* data = static_cast<const uint8_t*>(rows->data);
      e.blocks.assign(data, data + vocab * e.row_bytes);
      source_.release(llama_tensor::embedding, 0);
      return {};
    }
    e.values.resize(size_t(vocab * dim));
    if (auto err = read(llama_tensor::embedding, 0, e.values.data())) return err;
    // Quantized as read like the matrices, as llama.cpp's converter quantizes it.
    if (options_.quantize && dim % kernels::quant_block_elements(*options_.quantize) == 0) {
      e.type = options_.quantize;
      e.row_bytes =
          dim / kernels::quant_block_elements(*e.type) * kernels::quant_block_bytes(*e.type);
      e.blocks.resize(size_t(vocab * e.row_bytes));
      for (int64_t r = 0; r < vocab; ++r)
        kernels::quantize_row(*e.type, e.values.data() + r * dim, e.blocks.data() + r * e.row_bytes,
                              dim);
      e.values = {};
    }
    return {};
  }

  error read(llama_tensor t, int32_t layer, float* out) {
    auto err = source_.read(t, layer, out);
    source_.release(t, layer);
    return err;
  }

  error vector(llama_tensor t, int32_t layer, std::vector<float>& out) {
    out.resize(size_t(tensor_dims(s_, t).second));
    return read(t, layer, out.data());
  }

  // The parts of `plan`: read as the rows of W^T one after another, the norm's weight folded
  // in, packed as one matrix; or, where any part is quantized, each part on its own.
  error product(const product_plan& plan, int32_t layer, const std::vector<float>& norm,
                weight_product& out) {
    const auto k = kinds(plan, layer);
    if (any(k)) {
      for (size_t i = 0; i < plan.parts.size(); ++i)
        if (auto err = part(plan.parts[i], layer, k[i], out)) return err;
      out.set_folded(false);
      return {};
    }
    int64_t rows = 0, in = 0;
    for (auto t : plan.parts) {
      const auto [r, c] = tensor_dims(s_, t);
      rows += r;
      in = c;
    }
    staging_.resize(size_t(rows * in));
    int64_t at = 0;
    for (auto t : plan.parts) {
      if (auto err = read(t, layer, staging_.data() + at * in)) return err;
      at += tensor_dims(s_, t).first;
    }
    out.add(packed_matrix::from_rows(staging_.data(), in, rows, in,
                                     plan.norm ? norm.data() : nullptr, options_.format, arena_));
    out.set_folded(true);
    return {};
  }

  // One part of a product whose norm stays unfolded: the file's blocks, quantized as read, or
  // packed in the float format.
  error part(llama_tensor t, int32_t layer, std::optional<kernels::quant_type> kind,
             weight_product& out) {
    const auto [rows, in] = tensor_dims(s_, t);
    if (kind) {
      if (auto stored = source_.quantized(t, layer)) {
        out.add(kernels::quantized_matrix(stored->type, stored->data, in, rows, arena_));
        source_.release(t, layer);
        return {};
      }
    }
    staging_.resize(size_t(rows * in));
    if (auto err = read(t, layer, staging_.data())) return err;
    if (!kind) {
      out.add(packed_matrix::from_rows(staging_.data(), in, rows, in, nullptr, options_.format,
                                       arena_));
      return {};
    }
    // Quantized as read, row by row (ggml's reference quantization).
    const int64_t row_bytes =
        in / kernels::quant_block_elements(*kind) * kernels::quant_block_bytes(*kind);
    blocks_.resize(size_t(rows * row_bytes));
    for (int64_t r = 0; r < rows; ++r)
      kernels::quantize_row(*kind, staging_.data() + r * in, blocks_.data() + r * row_bytes, in);
    out.add(kernels::quantized_matrix(*kind, blocks_.data(), in, rows, arena_));
    return {};
  }

  const llama_source& source_;
  const matrix_options& options_;
  const llama_shape& s_;
  huge_page_arena* arena_ = nullptr;
  std::vector<float> staging_;   // one product's W^T as read, reused
  std::vector<uint8_t> blocks_;  // one matrix quantized as read, reused
};

}  // namespace

void weight_product::add(kernels::packed_matrix m) {
  const int64_t out = m.out();
  parts_.push_back({std::move(m), out_});
  out_ += out;
}

void weight_product::add(kernels::quantized_matrix m) {
  const int64_t out = m.out();
  parts_.push_back({std::move(m), out_});
  out_ += out;
}

std::vector<std::string> weight_product::formats() const {
  std::vector<std::string> out;
  for (const auto& p : parts_) {
    if (const auto* q = std::get_if<kernels::quantized_matrix>(&p.matrix)) {
      out.push_back(kernels::quant_type_name(q->type()));
      continue;
    }
    const auto f = std::get<packed_matrix>(p.matrix).format();
    out.push_back(f == kernels::weight_format::f32 ? "f32" : "bf16");
  }
  return out;
}

void weight_product::multiply(const float* x, int64_t x_stride, int64_t m, float* y,
                              int64_t y_stride, const float* bias, bool accumulate) const {
  for (const auto& p : parts_)
    std::visit(
        [&](const auto& w) {
          w.multiply(x, x_stride, m, y + p.column, y_stride, bias ? bias + p.column : nullptr,
                     accumulate);
        },
        p.matrix);
}

std::vector<std::string> llama_matrices::quantized_types() const {
  std::vector<std::string> out;
  auto add = [&](const weight_product& p) {
    for (const auto& f : p.formats())
      if (f != "f32" && f != "bf16" && std::find(out.begin(), out.end(), f) == out.end())
        out.push_back(f);
  };
  for (const auto& l : layers)
    for (const auto* p : {&l.wqkv, &l.wo, &l.w13, &l.w2}) add(*p);
  add(classifier);
  return out;
}

void embedding_rows::row(int64_t id, float* out) const {
  if (type)
    kernels::dequantize_row(*type, blocks.data() + id * row_bytes, out, dim);
  else
    std::memcpy(out, values.data() + id * dim, size_t(dim) * sizeof(float));
}

expected<llama_matrices> build_llama_matrices(const llama_source& source,
                                              const matrix_options& options) {
  return builder{source, options}.build();
}

}  // namespace conveyor::model
