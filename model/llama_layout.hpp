// The Llama weights as the networks compute with them, built once at load: each matrix
// transposed to [in, out] so that y = x W^T is one matrix product, q|k|v and w1|w3 fused, every
// RMSNorm weight folded into the rows of the matrix that follows it; and the rotary tables.
// Shared by the plain-loop CPU network (llama_loops.cpp) and the torch-operation network of any
// device (llama_ops.cpp). Internal to model/: only those files include it (it includes ATen).
#pragma once

#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/checkpoint.hpp"

namespace conveyor::model {

/// One layer's matrices, float32 on the CPU.
struct llama_layer_tensors {
  at::Tensor wqkv_t;  ///< [dim, q_dim + 2 kv_dim], rms_att folded
  at::Tensor bqkv;    ///< [q_dim + 2 kv_dim] biases of q|k|v; undefined without biases
  at::Tensor wo_t;    ///< [q_dim, dim]
  at::Tensor w13_t;   ///< [dim, 2 hidden], rms_ffn folded
  at::Tensor w2_t;    ///< [hidden, dim]
};

/// Every tensor a forward pass reads, float32 on the CPU.
struct llama_tensors {
  at::Tensor embedding;  ///< [vocab, dim]
  std::vector<llama_layer_tensors> layers;
  at::Tensor wcls_t;  ///< [dim, vocab], rms_final folded
  /// Rotary tables [context, head_size / 2]: cos and sin of position * theta^(-2j / head_size)
  /// (with Llama 3's scaling of the frequencies where the shape has it), turning the adjacent
  /// pairs (2j, 2j + 1) of each head (llama2.c's layout).
  at::Tensor cos, sin;
};

/// The rotary frequencies of `s`: theta^(-2j / head_size) for j < head_size / 2, scaled as
/// transformers' "llama3" rope type does where s.rope_scaling.factor is set.
std::vector<double> rotary_frequencies(const llama_shape& s);

/// The rotary tables (cos, sin) of llama_tensors for a context of `context` positions.
std::pair<at::Tensor, at::Tensor> rotary_tables(const llama_shape& s, int32_t context);

/// Lays out `w` for a context of `context` positions.
llama_tensors lay_out_llama(const llama_weights& w, int32_t context);

}  // namespace conveyor::model
