// Which Llama network computes where: the plain loops on the CPU, torch operations elsewhere.
#include <string>

#include "model/causal_lm.hpp"
#include "model/forward_pass.hpp"
#include "model/llama_source.hpp"

namespace conveyor::model {

// model/llama_loops.cpp
expected<std::unique_ptr<causal_lm>> make_llama_loops(const llama_source& source,
                                                      const runtime_options& options,
                                                      int32_t context);
// model/llama_ops.cpp
expected<std::unique_ptr<causal_lm>> make_llama_ops(const llama_weights& weights,
                                                    const runtime_options& options,
                                                    int32_t context);

const char* dtype_name(compute_dtype dtype) {
  return dtype == compute_dtype::bf16 ? "bf16" : "f32";
}

int64_t bytes_per_element(compute_dtype dtype) {
  return dtype == compute_dtype::bf16 ? 2 : 4;
}

int64_t kv_cache_bytes(const llama_shape& shape, int32_t sequences, int32_t tokens,
                       compute_dtype dtype) {
  return 2 * int64_t{shape.n_layers} * sequences * tokens * shape.kv_dim() *
         bytes_per_element(dtype);
}

int32_t kv_blocks_in(const llama_shape& shape, int64_t bytes, int32_t block_size,
                     compute_dtype dtype) {
  return int32_t(bytes / kv_cache_bytes(shape, 1, block_size, dtype));
}

int32_t default_kv_blocks(int32_t slots, int32_t context, int32_t block_size) {
  return slots * ((context + block_size - 1) / block_size);
}

expected<std::unique_ptr<causal_lm>> make_llama(const llama_source& source,
                                                const runtime_options& options) {
  auto context = checked_context(source.shape(), options);
  if (!context) return context.error();
  const bool on_cpu = options.device == "cpu";
  bool loops = on_cpu;  // the CPU takes the plain loops, every other device torch operations
  switch (options.network) {
    case llama_network::automatic:
      break;
    case llama_network::loops:
      if (!on_cpu)
        return make_error(ec::bad_config, "the plain-loop network runs on \"cpu\" only, not on '" +
                                              options.device + "'");
      loops = true;
      break;
    case llama_network::torch_ops:
      loops = false;
      break;
  }
  if (loops) return make_llama_loops(source, options, *context);
  auto weights = read_all(source);
  if (!weights) return weights.error();
  return make_llama_ops(*weights, options, *context);
}

expected<std::unique_ptr<causal_lm>> make_llama(const llama_weights& weights,
                                                const runtime_options& options) {
  return make_llama(*source_of(weights), options);
}

}  // namespace conveyor::model
