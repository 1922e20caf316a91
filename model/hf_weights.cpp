// Reading a Hugging Face directory's tensors into llama_weights.
#include "model/hf_weights.hpp"

#include <cstring>
#include <vector>

#include "model/llama_source.hpp"
#include "model/safetensors.hpp"

namespace conveyor::model {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Reads tensors by name into float32, checking each shape against config.json.
class tensor_reader {
 public:
  tensor_reader(const safetensors_set& set, std::string dir) : set_(set), dir_(std::move(dir)) {}

  // Reads tensor `name` of `shape` into `dst`.
  error into(const std::string& name, const std::vector<int64_t>& shape, float* dst) const {
    const safetensors_file* file = set_.file_of(name);
    if (file == nullptr)
      return make_error(ec::bad_file, set_.where() + ": no tensor '" + name + "' (config.json's " +
                                          "architecture needs it)");
    const tensor_entry& t = *file->find(name);
    if (t.shape != shape)
      return make_error(ec::bad_file, file->path() + ": tensor '" + name + "' has shape " +
                                          shape_text(t.shape) + " but " + dir_ +
                                          "/config.json implies " + shape_text(shape));
    return file->read_f32(name, dst);
  }

 private:
  const safetensors_set& set_;
  std::string dir_;
};

}  // namespace

void adjacent_pairs_from_halves(float* rows, int64_t heads, int64_t head_size, int64_t cols) {
  adjacent_pairs_from_halves(reinterpret_cast<uint8_t*>(rows), heads, head_size,
                             cols * int64_t(sizeof(float)));
}

void adjacent_pairs_from_halves(uint8_t* rows, int64_t heads, int64_t head_size,
                                int64_t row_bytes) {
  // Hugging Face's row i * half + j (i: which half, j < half) is llama2.c's row 2j + i.
  const int64_t half = head_size / 2;
  std::vector<uint8_t> head(size_t(head_size * row_bytes));
  for (int64_t h = 0; h < heads; ++h) {
    uint8_t* base = rows + h * head_size * row_bytes;
    std::memcpy(head.data(), base, head.size());
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < half; ++j)
        std::memcpy(base + (2 * j + i) * row_bytes, head.data() + (i * half + j) * row_bytes,
                    size_t(row_bytes));
  }
}

namespace {

// A directory's tensors by the names transformers gives them, q and k rows reordered per head.
class hf_source final : public llama_source {
 public:
  hf_source(const model_info& info, safetensors_set set)
      : info_(info), set_(std::move(set)), read_(set_, info.path) {}
  const llama_shape& shape() const override { return info_.shape; }
  std::vector<int32_t> end_ids() const override { return info_.end_ids; }

  error read(llama_tensor t, int32_t layer, float* out) const override {
    const auto [rows, cols] = tensor_dims(info_.shape, t);
    std::vector<int64_t> dims{rows, cols};
    if (rows == 1) dims = {cols};
    if (auto err = read_.into(name_of(t, layer), dims, out)) return err;
    const llama_shape& s = info_.shape;
    const int64_t hs = s.head_size();
    const bool bias = rows == 1;
    if (t == llama_tensor::wq || t == llama_tensor::bq)
      adjacent_pairs_from_halves(out, s.n_heads, hs, bias ? 1 : cols);
    if (t == llama_tensor::wk || t == llama_tensor::bk)
      adjacent_pairs_from_halves(out, s.n_kv_heads, hs, bias ? 1 : cols);
    return {};
  }

 private:
  std::string name_of(llama_tensor t, int32_t layer) const {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    switch (t) {
      case llama_tensor::embedding:
        return "model.embed_tokens.weight";
      case llama_tensor::rms_att:
        return p + "input_layernorm.weight";
      case llama_tensor::wq:
        return p + "self_attn.q_proj.weight";
      case llama_tensor::wk:
        return p + "self_attn.k_proj.weight";
      case llama_tensor::wv:
        return p + "self_attn.v_proj.weight";
      case llama_tensor::bq:
        return p + "self_attn.q_proj.bias";
      case llama_tensor::bk:
        return p + "self_attn.k_proj.bias";
      case llama_tensor::bv:
        return p + "self_attn.v_proj.bias";
      case llama_tensor::wo:
        return p + "self_attn.o_proj.weight";
      case llama_tensor::rms_ffn:
        return p + "post_attention_layernorm.weight";
      case llama_tensor::w1:
        return p + "mlp.gate_proj.weight";
      case llama_tensor::w2:
        return p + "mlp.down_proj.weight";
      case llama_tensor::w3:
        return p + "mlp.up_proj.weight";
      case llama_tensor::rms_final:
        return "model.norm.weight";
      // Tied embeddings: transformers' save_pretrained leaves lm_head out; when a file has it
      // anyway, transformers ties it to the embedding, and so does Conveyor.
      case llama_tensor::classifier:
        return info_.shape.shared_classifier ? "model.embed_tokens.weight" : "lm_head.weight";
    }
    return "";
  }

  model_info info_;
  safetensors_set set_;
  tensor_reader read_;
};

}  // namespace

expected<std::unique_ptr<llama_source>> open_hf_source(const model_info& info,
                                                       hf_load_stats* stats) {
  auto set = safetensors_set::open(info.path);
  if (!set) return set.error();
  if (stats != nullptr) {
    stats->file_bytes = set->data_bytes();
    stats->dtype = set->main_dtype();
    stats->where = set->where();
  }
  std::unique_ptr<llama_source> source = std::make_unique<hf_source>(info, std::move(*set));
  return source;
}

expected<llama_weights> load_hf_weights(const model_info& info, hf_load_stats* stats) {
  auto source = open_hf_source(info, stats);
  if (!source) return source.error();
  return read_all(**source);
}

}  // namespace conveyor::model
