// inspect_model: what a model spec names, without loading its weights.
#include "model/model_info.hpp"

#include <filesystem>

#include "kernels/packed_matmul.hpp"
#include "model/causal_lm.hpp"
#include "model/gguf_model.hpp"
#include "model/safetensors.hpp"

namespace conveyor::model {

namespace {

std::string folder_name(const std::string& dir) {
  std::filesystem::path p{dir};
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  return p.filename().string();
}

}  // namespace

expected<compute_dtype> choose_dtype(const std::string& requested, const std::string& device,
                                     const std::string& weights_dtype) {
  if (requested == "f32") return compute_dtype::f32;
  if (requested == "bf16") return compute_dtype::bf16;
  if (requested == "q8_0" || requested == "q4_0") {
    if (device != "cpu")
      return make_error(ec::bad_config, "model.dtype = '" + requested +
                                            "' quantizes weights for the CPU's plain-loop "
                                            "network; executors on '" +
                                            device + "' compute in 'auto', 'f32' or 'bf16'");
    return compute_dtype::f32;  // the activations and the matrices that stay in floats
  }
  if (requested != "auto")
    return make_error(ec::bad_config,
                      "model.dtype must be 'auto', 'f32', 'bf16', 'q8_0' or "
                      "'q4_0', got '" +
                          requested + "'");
  if (device == "cpu") return weights_dtype == "BF16" ? compute_dtype::bf16 : compute_dtype::f32;
  return weights_dtype == "BF16" || weights_dtype == "F16" ? compute_dtype::bf16
                                                           : compute_dtype::f32;
}

std::string choose_quantize(const std::string& requested) {
  return requested == "q8_0" || requested == "q4_0" ? requested : std::string{};
}

expected<compute_dtype> choose_kv_dtype(const std::string& requested, compute_dtype dtype) {
  if (requested == "auto") return dtype;
  if (requested == "f32") return compute_dtype::f32;
  if (requested == "bf16") return compute_dtype::bf16;
  return make_error(ec::bad_config, "model.kv_cache_dtype must be 'auto', 'f32' or 'bf16', got '" +
                                        requested + "'");
}

bool choose_bf16_inputs(bool requested, compute_dtype dtype) {
  return requested && dtype == compute_dtype::bf16 &&
         kernels::packed_matrix::bf16_dot_instruction();
}

expected<model_info> inspect_model(const std::string& spec) {
  model_info info;
  info.path = spec;
  if (spec == "trivial") {
    info.kind = model_kind::trivial;
    info.name = "trivial";
    info.shape = llama_shape{8, 8, 1, 1, 1, 512, 512, true};
    info.architecture = "trivial";
    info.tokenizer = default_tokenizer_for(spec);
    return info;
  }
  if (spec.rfind("synthetic:", 0) == 0) {
    auto shape = synthetic_shape(spec.substr(10));
    if (!shape) return shape.error();
    info.kind = model_kind::synthetic;
    info.name = spec.substr(10);
    info.shape = *shape;
    info.architecture = "llama2.c";
    info.tokenizer = default_tokenizer_for(spec);
    return info;
  }
  if (is_directory(spec)) {
    auto hf = read_hf_config(spec);
    if (!hf) return hf.error();
    auto set = safetensors_set::open(spec);
    if (!set) return set.error();
    hf->weights_dtype = set->main_dtype();
    hf->name = folder_name(spec);
    return hf;
  }
  if (is_gguf_file(spec)) return read_gguf_info(spec);
  auto shape = read_llama2c_shape(spec);
  if (!shape) return shape.error();
  info.kind = model_kind::llama2c;
  info.name = std::filesystem::path{spec}.stem().string();
  info.shape = *shape;
  info.architecture = "llama2.c";
  info.tokenizer = default_tokenizer_for(spec);
  return info;
}

}  // namespace conveyor::model
