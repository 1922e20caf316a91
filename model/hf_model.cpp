// load_hf_model: a Hugging Face model directory read, checked, laid out and summed up for the
// start-up log. No logging here: model/ is compiled against torch's headers, whose bundled fmt
// clashes with spdlog's in the CUDA build; the callers log the summary.
#include <chrono>
#include <cstdio>

#include "model/causal_lm.hpp"
#include "model/hf_weights.hpp"
#include "model/load_report.hpp"
#include "model/model_info.hpp"

namespace conveyor::model {

expected<std::unique_ptr<causal_lm>> load_hf_model(const std::string& dir,
                                                   const runtime_options& options,
                                                   std::string* summary) {
  const auto start = std::chrono::steady_clock::now();
  auto info = read_hf_config(dir);
  if (!info) return info.error();
  const int32_t context = options.context == 0 ? info->shape.seq_len : options.context;
  if (auto err = check_sliding_window(*info, context)) return err;
  hf_load_stats stats;
  auto source = open_hf_source(*info, &stats);
  if (!source) return source.error();
  const auto read = std::chrono::steady_clock::now();
  auto model = make_llama(**source, options);
  if (!model) return model.error();
  const auto done = std::chrono::steady_clock::now();
  if (summary != nullptr) {
    char line[160];
    std::snprintf(line, sizeof(line), "%lld parameters, %.1f MiB of %s",
                  static_cast<long long>(info->shape.parameter_count()),
                  double(stats.file_bytes) / (1024.0 * 1024.0), stats.dtype.c_str());
    *summary = "loaded " + dir + " (" + info->architecture + "): " + line + " in " + stats.where +
               ", computing in " + dtype_name(options.dtype) + "; " +
               load_report(start, read, done);
  }
  return model;
}

}  // namespace conveyor::model
