// Model specs ("path", "synthetic:NAME", "trivial"), default paths, threads and BLAS reporting.
#include <dlfcn.h>
#include <link.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <ATen/Parallel.h>

#include "common/files.hpp"
#include "common/install_dirs.hpp"
#include "kernels/blas_kernels.hpp"
#include "kernels/packed_matmul.hpp"
#include "kernels/work_pool.hpp"
#include "model/causal_lm.hpp"
#include "model/gguf_model.hpp"
#include "model/model_info.hpp"

namespace conveyor::model {

namespace {

std::string directory_of(const std::string& path) {
  auto pos = path.find_last_of('/');
  return pos == std::string::npos ? std::string{"."} : path.substr(0, pos);
}

// A model that does no arithmetic at all.
class trivial_model final : public causal_lm {
 public:
  explicit trivial_model(const runtime_options& opt)
      : slots_(opt.slots),
        context_(opt.context == 0 ? 512 : opt.context),
        block_size_(opt.block_size),
        kv_blocks_(opt.kv_blocks != 0 ? opt.kv_blocks
                                      : default_kv_blocks(slots_, context_, block_size_)) {
    shape_ = llama_shape{8, 8, 1, 1, 1, 512, context_, true};
    logits_.assign(static_cast<size_t>(std::max(slots_, 1)) * shape_.vocab_size, 0.0f);
  }
  const llama_shape& shape() const override { return shape_; }
  int32_t slots() const override { return slots_; }
  int32_t context() const override { return context_; }
  int32_t block_size() const override { return block_size_; }
  int32_t kv_blocks() const override { return kv_blocks_; }
  bool ignores_end_tokens() const override { return true; }
  logits_view prefill(const std::vector<prefill_item>& items) override {
    // The position of each returned row: every token of an item with all_logits.
    positions_.clear();
    for (const auto& it : items) {
      if (it.all_logits) {
        for (int32_t t = 0; t < it.count; ++t) positions_.push_back(it.start + t);
      } else {
        positions_.push_back(it.start + (it.logits_at < 0 ? it.count - 1 : it.logits_at));
      }
    }
    return fill(positions_.size(), [&](size_t i) { return positions_[i]; });
  }
  logits_view decode(const std::vector<decode_item>& items) override {
    return fill(items.size(), [&](size_t i) { return items[i].position; });
  }
  std::string describe() const override {
    return "trivial model (no arithmetic), " + std::to_string(slots_) + " slots x " +
           std::to_string(context_) + " tokens";
  }
  int64_t kv_cache_bytes() const override { return 0; }
  // No cache: the logits depend on the position alone.
  void copy_block(int32_t, int32_t) override {}

 private:
  template <class PositionOf>
  logits_view fill(size_t n, PositionOf position_of) {
    const size_t v = static_cast<size_t>(shape_.vocab_size);
    if (logits_.size() < n * v) logits_.resize(n * v);
    for (size_t i = 0; i < n; ++i) {
      float* row = logits_.data() + i * v;
      std::fill(row, row + v, 0.0f);
      row[static_cast<size_t>(position_of(i) * 7 + 3) % v] = 1.0f;
    }
    return {logits_.data(), static_cast<int32_t>(n), shape_.vocab_size};
  }
  int32_t slots_;
  int32_t context_;
  int32_t block_size_;
  int32_t kv_blocks_;
  llama_shape shape_;
  std::vector<float> logits_;
  std::vector<int32_t> positions_;
};

int collect_blas(dl_phdr_info* info, size_t, void* data) {
  auto* names = static_cast<std::vector<std::string>*>(data);
  if (info->dlpi_name == nullptr) return 0;
  std::string name = info->dlpi_name;
  if (name.find("blas") != std::string::npos || name.find("mkl") != std::string::npos) {
    char resolved[4096];
    if (::realpath(name.c_str(), resolved) != nullptr) name = resolved;
    names->push_back(name);
  }
  return 0;
}

}  // namespace

std::unique_ptr<causal_lm> make_trivial_model(const runtime_options& options) {
  return std::make_unique<trivial_model>(options);
}

expected<std::unique_ptr<causal_lm>> load_model(const std::string& spec,
                                                const runtime_options& options,
                                                std::string* summary) {
  if (spec == "trivial") return make_trivial_model(options);
  if (spec.rfind("synthetic:", 0) == 0) {
    auto weights = make_synthetic_weights(spec.substr(10), options.seed);
    if (!weights) return weights.error();
    return make_llama(*weights, options);
  }
  if (is_directory(spec)) return load_hf_model(spec, options, summary);
  if (is_gguf_file(spec)) return load_gguf_model(spec, options, summary);
  auto weights = load_llama2c_checkpoint(spec);
  if (!weights) return weights.error();
  return make_llama(*weights, options);
}

std::string resolve_path(const std::string& path) {
  if (path == "trivial" || path.rfind("synthetic:", 0) == 0) return path;
  return resolve_data_path(path);
}

expected<llama_shape> shape_of(const std::string& spec) {
  if (spec == "trivial") return llama_shape{8, 8, 1, 1, 1, 512, 512, true};
  if (spec.rfind("synthetic:", 0) == 0) return synthetic_shape(spec.substr(10));
  if (is_directory(spec)) {
    auto info = read_hf_config(spec);
    if (!info) return info.error();
    return info->shape;
  }
  if (is_gguf_file(spec)) {
    auto info = read_gguf_info(spec);
    if (!info) return info.error();
    return info->shape;
  }
  return read_llama2c_shape(spec);
}

std::string default_tokenizer_for(const std::string& model_spec) {
  if (is_directory(model_spec)) return model_spec + "/tokenizer.json";
  if (is_gguf_file(model_spec)) return model_spec;  // the file carries its vocabulary
  if (model_spec.rfind("synthetic:", 0) != 0 && model_spec != "trivial") {
    auto beside = directory_of(model_spec) + "/tok512.model";
    if (is_regular_file(beside)) return beside;
    auto bin = directory_of(model_spec) + "/tokenizer.model";
    if (is_regular_file(bin)) return bin;
  }
  return resolve_data_path(std::string{default_tokenizer_path});
}

void set_compute_threads(int32_t threads) {
  if (threads < 1) return;
  at::set_num_threads(threads);
  kernels::compute_pool().resize(threads);
  using setter = void (*)(int);
  if (auto f = reinterpret_cast<setter>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    f(threads);
}

int32_t auto_compute_threads(const llama_shape& shape, int32_t max_batch, int32_t cores) {
  cores = std::max(cores, 1);
  const bool heads = shape.n_heads > 0;  // head_size() divides by it
  const int64_t d = shape.dim, q = heads ? shape.q_dim() : d, kv = heads ? shape.kv_dim() : d;
  // The network's products (llama_loops.cpp): qkv, o, gate and up, down, the classifier.
  const int64_t products[][2] = {{d, q + 2 * kv}, {q, d}, {d, 2 * int64_t(shape.hidden_dim)},
                                 {shape.hidden_dim, d}, {d, shape.vocab_size}};
  for (const auto& p : products)
    if (kernels::packed_matrix::wakes_pool(std::max(max_batch, 1), p[0], p[1])) return cores;
  return 1;
}

std::string compute_backend_description() {
  std::vector<std::string> libs;
  ::dl_iterate_phdr(collect_blas, &libs);
  std::ostringstream os;
  using get_config = char* (*)();
  using get_threads = int (*)();
  auto config = reinterpret_cast<get_config>(::dlsym(RTLD_DEFAULT, "openblas_get_config"));
  auto threads = reinterpret_cast<get_threads>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  bool reference = false;
  for (const auto& lib : libs)
    if (lib.find("/blas/libblas") != std::string::npos) reference = true;
  if (config != nullptr && !reference) {
    os << "BLAS: OpenBLAS (" << config() << ")";
    if (threads != nullptr) os << ", " << threads() << " threads";
  } else if (reference) {
    os << "BLAS: reference BLAS (slow: install libopenblas0-openmp)";
  } else {
    os << "BLAS: unknown";
  }
  const std::string core = kernels::blas_core();
  // (Unless the user chose the kernels.)
  if (const std::string fitting = kernels::fitting_blas_core(core, kernels::processor_vector_features());
      !fitting.empty() && std::getenv("OPENBLAS_CORETYPE") == nullptr)
    os << "; warning: OpenBLAS runs its " << core << " kernels on a processor that fits " << fitting
       << " (several times faster): set OPENBLAS_CORETYPE=" << fitting;
  os << "; libraries:";
  for (const auto& lib : libs) os << ' ' << lib;
  os << "; torch intra-op threads " << at::get_num_threads() << "; compute pool threads "
     << kernels::compute_pool().threads();
  return os.str();
}

}  // namespace conveyor::model
