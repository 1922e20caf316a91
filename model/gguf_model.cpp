// GGUF models: metadata to a model_info, tensors to a llama_source.
#include "model/gguf_model.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "gguf/gguf_file.hpp"
#include "kernels/packed_matmul.hpp"
#include "kernels/quant_blocks.hpp"
#include "model/hf_weights.hpp"
#include "model/llama_source.hpp"
#include "model/load_report.hpp"

namespace conveyor::model {

namespace {

using gguf::gguf_file;
using gguf::tensor_info;

// The quantized types the kernels multiply as the file keeps them.
std::optional<kernels::quant_type> quant_of(uint32_t type) {
  switch (gguf::ggml_type(type)) {
    case gguf::ggml_type::q8_0:
      return kernels::quant_type::q8_0;
    case gguf::ggml_type::q4_0:
      return kernels::quant_type::q4_0;
    case gguf::ggml_type::q4_k:
      return kernels::quant_type::q4_k;
    case gguf::ggml_type::q6_k:
      return kernels::quant_type::q6_k;
    default:
      return std::nullopt;
  }
}

bool float_type(uint32_t type) {
  const auto t = gguf::ggml_type(type);
  return t == gguf::ggml_type::f32 || t == gguf::ggml_type::f16 || t == gguf::ggml_type::bf16;
}

// llama.cpp's name of tensor `t` of `layer`.
std::string gguf_name(llama_tensor t, int32_t layer) {
  const std::string b = "blk." + std::to_string(layer) + ".";
  switch (t) {
    case llama_tensor::embedding:
      return "token_embd.weight";
    case llama_tensor::rms_att:
      return b + "attn_norm.weight";
    case llama_tensor::wq:
      return b + "attn_q.weight";
    case llama_tensor::wk:
      return b + "attn_k.weight";
    case llama_tensor::wv:
      return b + "attn_v.weight";
    case llama_tensor::bq:
      return b + "attn_q.bias";
    case llama_tensor::bk:
      return b + "attn_k.bias";
    case llama_tensor::bv:
      return b + "attn_v.bias";
    case llama_tensor::wo:
      return b + "attn_output.weight";
    case llama_tensor::rms_ffn:
      return b + "ffn_norm.weight";
    case llama_tensor::w1:
      return b + "ffn_gate.weight";
    case llama_tensor::w2:
      return b + "ffn_down.weight";
    case llama_tensor::w3:
      return b + "ffn_up.weight";
    case llama_tensor::rms_final:
      return "output_norm.weight";
    case llama_tensor::classifier:
      return "output.weight";
  }
  return "";
}

// Every tensor a network of `s` reads, with its layer.
std::vector<std::pair<llama_tensor, int32_t>> network_tensors(const llama_shape& s) {
  std::vector<std::pair<llama_tensor, int32_t>> all{{llama_tensor::embedding, 0}};
  for (int32_t l = 0; l < s.n_layers; ++l) {
    for (auto t : {llama_tensor::rms_att, llama_tensor::wq, llama_tensor::wk, llama_tensor::wv,
                   llama_tensor::wo, llama_tensor::rms_ffn, llama_tensor::w1, llama_tensor::w2,
                   llama_tensor::w3})
      all.emplace_back(t, l);
    if (s.qkv_bias)
      for (auto t : {llama_tensor::bq, llama_tensor::bk, llama_tensor::bv}) all.emplace_back(t, l);
  }
  all.emplace_back(llama_tensor::rms_final, 0);
  if (!s.shared_classifier) all.emplace_back(llama_tensor::classifier, 0);
  return all;
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

class gguf_source final : public llama_source {
 public:
  gguf_source(model_info info, std::shared_ptr<const gguf_file> file, bool halves)
      : info_(std::move(info)), file_(std::move(file)), halves_(halves) {}

  const llama_shape& shape() const override { return info_.shape; }
  std::vector<int32_t> end_ids() const override { return info_.end_ids; }

  error read(llama_tensor t, int32_t layer, float* out) const override {
    const tensor_info* info = tensor_of(t, layer);
    if (info == nullptr) return missing(t, layer);
    const int64_t n = info->elements();
    switch (gguf::ggml_type(info->type)) {
      case gguf::ggml_type::f32:
        std::memcpy(out, info->data, size_t(n) * sizeof(float));
        break;
      case gguf::ggml_type::f16:
        for (int64_t i = 0; i < n; ++i) out[i] = kernels::from_f16(half_at(info->data, i));
        break;
      case gguf::ggml_type::bf16:
        for (int64_t i = 0; i < n; ++i) out[i] = kernels::from_bf16(half_at(info->data, i));
        break;
      default: {
        const auto q = quant_of(info->type);
        if (!q) return unsupported(*info);
        kernels::dequantize_row(*q, info->data, out, n);
      }
    }
    if (halves_ && reordered(t)) {
      const auto& s = info_.shape;
      const int64_t heads =
          (t == llama_tensor::wq || t == llama_tensor::bq) ? s.n_heads : s.n_kv_heads;
      const bool bias = t == llama_tensor::bq || t == llama_tensor::bk;
      adjacent_pairs_from_halves(out, heads, s.head_size(), bias ? 1 : s.dim);
    }
    return {};
  }

  std::optional<kernels::quant_type> quantized_type(llama_tensor t, int32_t layer) const override {
    const tensor_info* info = tensor_of(t, layer);
    return info == nullptr ? std::nullopt : quant_of(info->type);
  }

  std::optional<quantized_rows> quantized(llama_tensor t, int32_t layer) const override {
    const tensor_info* info = tensor_of(t, layer);
    if (info == nullptr) return std::nullopt;
    const auto q = quant_of(info->type);
    if (!q) return std::nullopt;
    quantized_rows rows;
    rows.type = *q;
    rows.data = info->data;
    if (halves_ && reordered(t)) {
      const auto& s = info_.shape;
      rows.owned.assign(info->data, info->data + info->bytes);
      const int64_t heads = t == llama_tensor::wq ? s.n_heads : s.n_kv_heads;
      const int64_t row_bytes = int64_t(info->bytes) / info->dims[1];
      adjacent_pairs_from_halves(rows.owned.data(), heads, s.head_size(), row_bytes);
      rows.data = rows.owned.data();
    }
    return rows;
  }

  void release(llama_tensor t, int32_t layer) const override {
    if (const tensor_info* info = tensor_of(t, layer)) file_->release(*info);
  }

 private:
  // The q and k rows (and biases) that Qwen2's files keep in Hugging Face's order.
  static bool reordered(llama_tensor t) {
    return t == llama_tensor::wq || t == llama_tensor::wk || t == llama_tensor::bq ||
           t == llama_tensor::bk;
  }

  static uint16_t half_at(const uint8_t* data, int64_t i) {
    uint16_t bits;
    std::memcpy(&bits, data + 2 * i, sizeof(bits));
    return bits;
  }

  const tensor_info* tensor_of(llama_tensor t, int32_t layer) const {
    if (t == llama_tensor::classifier && info_.shape.shared_classifier) t = llama_tensor::embedding;
    return file_->tensor(gguf_name(t, layer));
  }

  error missing(llama_tensor t, int32_t layer) const {
    return make_error(ec::bad_file, file_->path() + ": no tensor '" + gguf_name(t, layer) + "'");
  }

  error unsupported(const tensor_info& t) const {
    return make_error(ec::bad_file, file_->path() + ": tensor '" + t.name + "' has type " +
                                        gguf::type_name(t.type) + ", which Conveyor does not " +
                                        "read (supported: " + supported_gguf_types + ")");
  }

  model_info info_;
  std::shared_ptr<const gguf_file> file_;
  bool halves_;
};

// Checks every tensor the network reads: present, of a supported type, of the shape the metadata
// implies. Returns the type that holds the most bytes.
expected<std::string> check_tensors(const gguf_file& file, const llama_shape& s) {
  std::map<std::string, uint64_t> bytes_of_type;
  for (const auto& [t, layer] : network_tensors(s)) {
    const std::string name = gguf_name(t, layer);
    const tensor_info* info = file.tensor(name);
    if (info == nullptr)
      return make_error(ec::bad_file, file.path() + ": no tensor '" + name +
                                          "' (the metadata's architecture needs it)");
    if (!float_type(info->type) && !quant_of(info->type))
      return make_error(
          ec::bad_file,
          file.path() + ": tensor '" + name + "' has type " + gguf::type_name(info->type) +
              ", which Conveyor does not read (supported: " + supported_gguf_types + ")");
    const auto [rows, cols] = tensor_dims(s, t);
    const std::vector<int64_t> want =
        rows == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{cols, rows};
    if (info->dims != want)
      return make_error(ec::bad_file, file.path() + ": tensor '" + name + "' has dims " +
                                          dims_text(info->dims) + " but the metadata implies " +
                                          dims_text(want));
    bytes_of_type[gguf::type_name(info->type)] += info->bytes;
  }
  std::string main;
  uint64_t most = 0;
  for (const auto& [type, bytes] : bytes_of_type)
    if (bytes > most) most = bytes, main = type;
  return main;
}

// The model an opened file describes (read_gguf_info's work, on a file opened once).
expected<model_info> info_of(const gguf_file& f);

}  // namespace

bool is_gguf_file(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) return false;
  // A file named .gguf is one whatever it holds: the GGUF reader says what is wrong with it.
  if (std::filesystem::path{path}.extension() == ".gguf") return true;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

expected<model_info> read_gguf_info(const std::string& path) {
  auto file = gguf_file::open(path);
  if (!file) return file.error();
  return info_of(**file);
}

namespace {

expected<model_info> info_of(const gguf_file& f) {
  const std::string& path = f.path();
  auto arch = f.string("general.architecture");
  if (!arch) return arch.error();
  if (*arch != "llama" && *arch != "qwen2")
    return make_error(ec::bad_file, path + ": key 'general.architecture' is '" + *arch +
                                        "'; Conveyor serves " + supported_gguf_architectures);
  const std::string a = *arch + ".";
  model_info info;
  info.kind = model_kind::gguf;
  info.path = path;
  info.name = std::filesystem::path{path}.stem().string();
  info.architecture = "gguf " + *arch;
  info.tokenizer = path;
  llama_shape& s = info.shape;
  // Integer keys that must fit the shape's int32 fields.
  auto int32_key = [&](const std::string& key, std::optional<int64_t> fallback,
                       int32_t& out) -> error {
    int64_t x = 0;
    if (fallback) {
      auto v = f.optional_integer(key);
      if (!v) return v.error();
      x = v->value_or(*fallback);
    } else {
      auto v = f.integer(key);
      if (!v) return v.error();
      x = *v;
    }
    if (x < 1 || x > (int64_t{1} << 30))
      return make_error(ec::bad_file,
                        path + ": key '" + key + "' is " + std::to_string(x) + ", out of range");
    out = int32_t(x);
    return {};
  };
  if (auto e = int32_key(a + "embedding_length", {}, s.dim)) return e;
  if (auto e = int32_key(a + "feed_forward_length", {}, s.hidden_dim)) return e;
  if (auto e = int32_key(a + "block_count", {}, s.n_layers)) return e;
  if (auto e = int32_key(a + "attention.head_count", {}, s.n_heads)) return e;
  if (auto e = int32_key(a + "attention.head_count_kv", s.n_heads, s.n_kv_heads)) return e;
  if (auto e = int32_key(a + "context_length", {}, s.seq_len)) return e;
  if (auto e = int32_key(a + "attention.key_length", s.dim / s.n_heads, s.head_dim)) return e;
  if (s.n_heads % s.n_kv_heads != 0 || s.head_dim % 2 != 0)
    return make_error(ec::bad_file, path + ": " + std::to_string(s.n_heads) + " heads of " +
                                        std::to_string(s.head_dim) + " over " +
                                        std::to_string(s.n_kv_heads) +
                                        " kv heads is not a Llama attention");
  auto theta = f.optional_number(a + "rope.freq_base");
  if (!theta) return theta.error();
  s.rope_theta = theta->value_or(10000.0);
  auto eps = f.optional_number(a + "attention.layer_norm_rms_epsilon");
  if (!eps) return eps.error();
  s.rms_norm_eps = float(eps->value_or(1e-5));
  auto scaling = f.optional_string(a + "rope.scaling.type");
  if (!scaling) return scaling.error();
  if (*scaling && **scaling != "none")
    return make_error(ec::bad_file, path + ": key '" + a + "rope.scaling.type' is '" + **scaling +
                                        "'; Conveyor reads no rotary scaling but Llama 3's "
                                        "(the rope_freqs tensor)");
  const tensor_info* embedding = f.tensor("token_embd.weight");
  if (embedding == nullptr || embedding->dims.size() != 2 || embedding->dims[1] > (1 << 30))
    return make_error(ec::bad_file, path +
                                        ": no two-dimensional tensor 'token_embd.weight' of at "
                                        "most 2^30 rows");
  s.vocab_size = int32_t(embedding->dims[1]);
  s.shared_classifier = f.tensor("output.weight") == nullptr;
  s.qkv_bias = f.tensor("blk.0.attn_q.bias") != nullptr;
  if (const tensor_info* freqs = f.tensor("rope_freqs.weight")) {
    if (freqs->type != uint32_t(gguf::ggml_type::f32) ||
        freqs->dims != std::vector<int64_t>{s.head_dim / 2})
      return make_error(ec::bad_file, path + ": tensor 'rope_freqs.weight' must be F32 of " +
                                          std::to_string(s.head_dim / 2) + " numbers");
    s.rope_factors.resize(size_t(s.head_dim / 2));
    std::memcpy(s.rope_factors.data(), freqs->data, s.rope_factors.size() * sizeof(float));
  }
  if (s.head_dim == s.dim / s.n_heads) s.head_dim = 0;  // llama2.c's default
  auto main = check_tensors(f, s);
  if (!main) return main.error();
  info.weights_dtype = *main;
  // What ends a sequence: end of sequence, end of turn, end of message (llama.cpp stops at each).
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    auto id = f.optional_integer(key);
    if (!id) return id.error();
    if (*id && **id >= 0 && **id < s.vocab_size) {
      const auto v = int32_t(**id);
      if (std::find(info.end_ids.begin(), info.end_ids.end(), v) == info.end_ids.end())
        info.end_ids.push_back(v);
    }
  }
  return info;
}

}  // namespace

expected<std::unique_ptr<causal_lm>> load_gguf_model(const std::string& path,
                                                     const runtime_options& options,
                                                     std::string* summary) {
  const auto start = std::chrono::steady_clock::now();
  auto file = gguf_file::open(path);
  if (!file) return file.error();
  auto info = info_of(**file);
  if (!info) return info.error();
  // llama.cpp keeps Llama's q and k rows in adjacent pairs (its converter reorders them), and
  // Qwen2's as Hugging Face does (halves; its rotary "neox" mode).
  const bool halves = info->architecture == "gguf qwen2";
  const gguf_source source(*info, std::move(*file), halves);
  const auto opened = std::chrono::steady_clock::now();
  auto model = make_llama(source, options);
  if (!model) return model.error();
  const auto done = std::chrono::steady_clock::now();
  if (summary != nullptr) {
    char line[200];
    std::snprintf(line, sizeof(line), "%lld parameters, %.1f MiB, most in %s",
                  static_cast<long long>(info->shape.parameter_count()),
                  double(std::filesystem::file_size(path)) / (1024.0 * 1024.0),
                  info->weights_dtype.c_str());
    *summary = "loaded " + path + " (" + info->architecture + "): " + line + "; " +
               load_report(start, opened, done);
  }
  return model;
}

}  // namespace conveyor::model
