// load_hf_model: a Hugging Face model directory read, checked, laid out and logged. Torch-free
// (spdlog and torch's bundled fmt must not meet in one file of the CUDA build).
#include <chrono>

#include <spdlog/spdlog.h>

#include "model/causal_lm.hpp"
#include "model/hf_weights.hpp"
#include "model/model_info.hpp"

namespace conveyor::model {

expected<std::unique_ptr<causal_lm>> load_hf_model(const std::string& dir,
                                                   const runtime_options& options) {
  const auto start = std::chrono::steady_clock::now();
  auto info = read_hf_config(dir);
  if (!info) return info.error();
  const int32_t context = options.context == 0 ? info->shape.seq_len : options.context;
  if (auto err = check_sliding_window(*info, context)) return err;
  hf_load_stats stats;
  auto weights = load_hf_weights(*info, &stats);
  if (!weights) return weights.error();
  const auto read = std::chrono::steady_clock::now();
  auto model = make_llama(*weights, options);
  if (!model) return model.error();
  const auto done = std::chrono::steady_clock::now();
  using ms = std::chrono::milliseconds;
  spdlog::info("loaded {} ({}): {} parameters, {:.1f} MiB of {} in {}, computing in {}; read in {} "
               "ms, laid out in {} ms",
               dir, info->architecture, info->shape.parameter_count(),
               double(stats.file_bytes) / (1024.0 * 1024.0), stats.dtype, stats.where,
               dtype_name(options.dtype), std::chrono::duration_cast<ms>(read - start).count(),
               std::chrono::duration_cast<ms>(done - read).count());
  return model;
}

}  // namespace conveyor::model
