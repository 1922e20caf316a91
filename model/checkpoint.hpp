// Llama weights as plain float arrays: the llama2.c checkpoint loader and seeded synthetic shapes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace conveyor::model {

/// Llama 3's scaling of the rotary frequencies (transformers' rope_type "llama3").
struct llama3_rope {
  /// How much slower the long wavelengths turn; 0 means no scaling.
  double factor = 0.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int32_t original_max_position_embeddings = 8192;
};

/// The shape of a Llama network (llama2.c's header, plus whether the classifier is shared).
struct llama_shape {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t vocab_size = 0;
  /// The context length the model was trained for.
  int32_t seq_len = 0;
  /// True when the classifier reuses the token embedding (positive vocab_size in the header).
  bool shared_classifier = true;
  // -- what Hugging Face configurations add (llama2.c's values by default) ------------------------
  /// Elements of one attention head; 0 means dim / n_heads (llama2.c). The queries are
  /// n_heads x head_size() wide, which may differ from dim.
  int32_t head_dim = 0;
  /// The base of the rotary frequencies.
  double rope_theta = 10000.0;
  /// Llama 3's rotary scaling (rope_scaling of type "llama3"); factor 0 means none.
  llama3_rope rope_scaling{};
  /// Divisors of each rotary frequency (head_size / 2 of them; GGUF's rope_freqs tensor, which
  /// llama.cpp's converter writes for Llama 3's scaling); empty means none.
  std::vector<float> rope_factors{};
  /// The epsilon of every RMSNorm.
  float rms_norm_eps = 1e-5f;
  /// True when q, k and v have biases (Qwen2).
  bool qkv_bias = false;

  int32_t head_size() const { return head_dim > 0 ? head_dim : dim / n_heads; }
  int32_t q_dim() const { return n_heads * head_size(); }
  int32_t kv_dim() const { return n_kv_heads * head_size(); }
  /// Number of float parameters (the classifier counted once when shared).
  int64_t parameter_count() const;
  friend bool operator==(const llama_shape& a, const llama_shape& b);
};

/// All weights of a Llama network, every matrix [out, in] row-major (y = W x), layers stacked.
struct llama_weights {
  llama_shape shape;
  std::vector<float> token_embedding;  ///< [vocab, dim]
  std::vector<float> rms_att;          ///< [layers, dim]
  std::vector<float> wq;               ///< [layers, q_dim, dim]
  std::vector<float> wk;               ///< [layers, kv_dim, dim]
  std::vector<float> wv;               ///< [layers, kv_dim, dim]
  std::vector<float> wo;               ///< [layers, dim, q_dim]
  std::vector<float> bq;               ///< [layers, q_dim]; empty unless shape.qkv_bias
  std::vector<float> bk;               ///< [layers, kv_dim]; empty unless shape.qkv_bias
  std::vector<float> bv;               ///< [layers, kv_dim]; empty unless shape.qkv_bias
  std::vector<float> rms_ffn;          ///< [layers, dim]
  std::vector<float> w1;               ///< [layers, hidden, dim]
  std::vector<float> w2;               ///< [layers, dim, hidden]
  std::vector<float> w3;               ///< [layers, hidden, dim]
  std::vector<float> rms_final;        ///< [dim]
  std::vector<float> wcls;             ///< [vocab, dim]; empty when shared with token_embedding
  /// True for random weights: the model has no real end token, so generation ignores EOS/BOS.
  bool synthetic = false;
  /// The ids that end a sequence (generation_config.json's eos_token_id); empty means the
  /// tokenizer's BOS and EOS, as llama2.c's run.c stops.
  std::vector<int32_t> end_ids;

  /// The classifier matrix, shared or not.
  const std::vector<float>& classifier() const {
    return shape.shared_classifier ? token_embedding : wcls;
  }
};

/// Reads the header of a llama2.c checkpoint and checks that the file size is exactly what the
/// header implies. The error names the file and the expected and actual sizes.
expected<llama_shape> read_llama2c_shape(const std::string& path);

/// Loads a llama2.c "version 0" checkpoint (the format in models/stories260K/README.md).
expected<llama_weights> load_llama2c_checkpoint(const std::string& path);

/// The named synthetic shapes ("s15m", "s42m"), or an error listing the known names.
expected<llama_shape> synthetic_shape(std::string_view name);

/// Deterministic random weights of a named shape: the same name and seed give the same bits.
expected<llama_weights> make_synthetic_weights(std::string_view name, uint64_t seed);

}  // namespace conveyor::model
