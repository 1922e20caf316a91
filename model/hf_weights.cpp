// Reading a Hugging Face directory's tensors into llama_weights.
#include "model/hf_weights.hpp"

#include <cstring>
#include <vector>

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

  bool has(const std::string& name) const { return set_.find(name) != nullptr; }

  // Appends tensor `name` of `shape` to `dst`.
  error append(const std::string& name, const std::vector<int64_t>& shape,
               std::vector<float>& dst) {
    const safetensors_file* file = set_.file_of(name);
    if (file == nullptr)
      return make_error(ec::bad_file, set_.where() + ": no tensor '" + name + "' (config.json's " +
                                          "architecture needs it)");
    const tensor_entry& t = *file->find(name);
    if (t.shape != shape)
      return make_error(ec::bad_file, file->path() + ": tensor '" + name + "' has shape " +
                                          shape_text(t.shape) + " but " + dir_ +
                                          "/config.json implies " + shape_text(shape));
    const size_t at = dst.size();
    dst.resize(at + size_t(t.elements()));
    return file->read_f32(name, dst.data() + at);
  }

 private:
  const safetensors_set& set_;
  std::string dir_;
};

}  // namespace

void adjacent_pairs_from_halves(float* rows, int64_t heads, int64_t head_size, int64_t cols) {
  // Hugging Face's row i * half + j (i: which half, j < half) is llama2.c's row 2j + i.
  const int64_t half = head_size / 2;
  std::vector<float> head(size_t(head_size * cols));
  for (int64_t h = 0; h < heads; ++h) {
    float* base = rows + h * head_size * cols;
    std::memcpy(head.data(), base, head.size() * sizeof(float));
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < half; ++j)
        std::memcpy(base + (2 * j + i) * cols, head.data() + (i * half + j) * cols,
                    size_t(cols) * sizeof(float));
  }
}

expected<llama_weights> load_hf_weights(const model_info& info, hf_load_stats* stats) {
  auto set = safetensors_set::open(info.path);
  if (!set) return set.error();
  if (stats != nullptr) {
    stats->file_bytes = set->data_bytes();
    stats->dtype = set->main_dtype();
    stats->where = set->where();
  }
  const llama_shape& s = info.shape;
  llama_weights w;
  w.shape = s;
  w.end_ids = info.end_ids;
  const int64_t d = s.dim, h = s.hidden_dim, q = s.q_dim(), kv = s.kv_dim(), v = s.vocab_size;
  const int64_t hs = s.head_size();
  tensor_reader read{*set, info.path};
  if (auto err = read.append("model.embed_tokens.weight", {v, d}, w.token_embedding)) return err;
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const size_t q_at = w.wq.size(), k_at = w.wk.size(), bq_at = w.bq.size(), bk_at = w.bk.size();
    for (auto err : {read.append(p + "input_layernorm.weight", {d}, w.rms_att),
                     read.append(p + "self_attn.q_proj.weight", {q, d}, w.wq),
                     read.append(p + "self_attn.k_proj.weight", {kv, d}, w.wk),
                     read.append(p + "self_attn.v_proj.weight", {kv, d}, w.wv),
                     read.append(p + "self_attn.o_proj.weight", {d, q}, w.wo),
                     read.append(p + "post_attention_layernorm.weight", {d}, w.rms_ffn),
                     read.append(p + "mlp.gate_proj.weight", {h, d}, w.w1),
                     read.append(p + "mlp.down_proj.weight", {d, h}, w.w2),
                     read.append(p + "mlp.up_proj.weight", {h, d}, w.w3)})
      if (err) return err;
    adjacent_pairs_from_halves(w.wq.data() + q_at, s.n_heads, hs, d);
    adjacent_pairs_from_halves(w.wk.data() + k_at, s.n_kv_heads, hs, d);
    if (s.qkv_bias) {
      for (auto err : {read.append(p + "self_attn.q_proj.bias", {q}, w.bq),
                       read.append(p + "self_attn.k_proj.bias", {kv}, w.bk),
                       read.append(p + "self_attn.v_proj.bias", {kv}, w.bv)})
        if (err) return err;
      adjacent_pairs_from_halves(w.bq.data() + bq_at, s.n_heads, hs, 1);
      adjacent_pairs_from_halves(w.bk.data() + bk_at, s.n_kv_heads, hs, 1);
    }
  }
  if (auto err = read.append("model.norm.weight", {d}, w.rms_final)) return err;
  // Tied embeddings: transformers' save_pretrained leaves lm_head out; when a file has it anyway,
  // transformers ties it to the embedding, and so does Conveyor.
  if (!s.shared_classifier)
    if (auto err = read.append("lm_head.weight", {v, d}, w.wcls)) return err;
  return w;
}

}  // namespace conveyor::model
