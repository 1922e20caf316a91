// What a model spec names, read without loading its weights: the kind of model, its shape, its
// end-of-sequence ids, the name clients see and its default tokenizer. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/causal_lm.hpp"
#include "model/checkpoint.hpp"

namespace conveyor::model {

/// Where a model's weights come from.
enum class model_kind {
  /// A llama2.c checkpoint file (.bin).
  llama2c,
  /// A Hugging Face model directory (config.json, safetensors, tokenizer.json).
  hugging_face,
  /// "synthetic:NAME": seeded random weights.
  synthetic,
  /// "trivial": a model that does no arithmetic.
  trivial,
  /// A GGUF file (llama.cpp's format), weights possibly quantized.
  gguf,
};

/// The architectures a Hugging Face directory may hold.
inline constexpr const char* supported_architectures =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM";

/// A model spec, inspected.
struct model_info {
  model_kind kind = model_kind::llama2c;
  /// The spec as given (a path resolved by the caller).
  std::string path;
  /// The name clients see by default: a directory's folder name, a checkpoint's file stem.
  std::string name;
  llama_shape shape;
  /// config.json's architecture ("LlamaForCausalLM", ...); "llama2.c" for a checkpoint.
  std::string architecture;
  /// The ids that end a sequence: generation_config.json's eos_token_id (an id or a list), else
  /// config.json's. Empty means the tokenizer's BOS and EOS (llama2.c's behaviour).
  std::vector<int32_t> end_ids;
  /// The attention window of config.json (Mistral, Qwen2 with use_sliding_window); 0: none.
  int32_t sliding_window = 0;
  /// How most of the weights are stored: "F32", "F16", "BF16" (safetensors names); a GGUF
  /// file's type of most bytes ("Q4_K", ...).
  std::string weights_dtype = "F32";
  /// The tokenizer to use when none is configured (DIR/tokenizer.json for a directory).
  std::string tokenizer;
};

/// Inspects `spec` (a resolved path, "synthetic:NAME" or "trivial"): reads config.json and
/// generation_config.json and the safetensors headers of a directory, the header of a
/// checkpoint. Errors name the file and the key.
expected<model_info> inspect_model(const std::string& spec);

/// Reads a Hugging Face directory's config.json (and generation_config.json where present).
/// Any architecture but the supported ones is refused with an error that lists them.
expected<model_info> read_hf_config(const std::string& dir);

/// Refuses a context that a sliding attention window would cut (Conveyor computes full
/// attention): the error names config.json and the key.
error check_sliding_window(const model_info& info, int32_t context);

/// The dtype to compute in for `requested` ("auto", "f32", "bf16", or "q8_0" / "q4_0": weights
/// quantized at load, activations in f32, on "cpu" only) on `device`: "auto" is bf16 when the
/// weights are stored in BF16 (on a GPU also F16), else f32.
expected<compute_dtype> choose_dtype(const std::string& requested, const std::string& device,
                                     const std::string& weights_dtype);

/// The KV cache's number format for `requested` (`model.kv_cache_dtype`: "auto", "f32" or
/// "bf16") when the network computes in `dtype`: "auto" is `dtype`.
expected<compute_dtype> choose_kv_dtype(const std::string& requested, compute_dtype dtype);

/// Whether an executor computing in `dtype` rounds its products' inputs to bf16
/// (`model.bf16_inputs`, on by default): where requested, the weights are bf16 and the processor
/// has AVX-512 BF16's dot product (elsewhere plain vector code would do the same arithmetic no
/// faster than float32 inputs).
bool choose_bf16_inputs(bool requested, compute_dtype dtype);

/// The type `model.dtype` quantizes weights to as they are read: "q8_0", "q4_0", or "" for none.
std::string choose_quantize(const std::string& requested);

/// True when `path` is a directory.
bool is_directory(const std::string& path);

}  // namespace conveyor::model
