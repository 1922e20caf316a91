// Tensor-by-tensor weight sources: the one over weights in memory, and reading any source whole.
#include "model/llama_source.hpp"

#include <cstring>

namespace conveyor::model {

namespace {

// The tensors one layer has, in file order.
constexpr llama_tensor layer_tensors[] = {
    llama_tensor::rms_att, llama_tensor::wq, llama_tensor::wk, llama_tensor::wv,
    llama_tensor::bq,      llama_tensor::bk, llama_tensor::bv, llama_tensor::wo,
    llama_tensor::rms_ffn, llama_tensor::w1, llama_tensor::w2, llama_tensor::w3};

bool is_bias(llama_tensor t) {
  return t == llama_tensor::bq || t == llama_tensor::bk || t == llama_tensor::bv;
}

// The float array of `w` that holds tensor `t` (every layer's, stacked).
const std::vector<float>& array_of(const llama_weights& w, llama_tensor t) {
  switch (t) {
    case llama_tensor::embedding:
      return w.token_embedding;
    case llama_tensor::rms_att:
      return w.rms_att;
    case llama_tensor::wq:
      return w.wq;
    case llama_tensor::wk:
      return w.wk;
    case llama_tensor::wv:
      return w.wv;
    case llama_tensor::bq:
      return w.bq;
    case llama_tensor::bk:
      return w.bk;
    case llama_tensor::bv:
      return w.bv;
    case llama_tensor::wo:
      return w.wo;
    case llama_tensor::rms_ffn:
      return w.rms_ffn;
    case llama_tensor::w1:
      return w.w1;
    case llama_tensor::w2:
      return w.w2;
    case llama_tensor::w3:
      return w.w3;
    case llama_tensor::rms_final:
      return w.rms_final;
    case llama_tensor::classifier:
      return w.classifier();
  }
  return w.rms_final;
}

std::vector<float>& array_of(llama_weights& w, llama_tensor t) {
  if (t == llama_tensor::classifier) return w.wcls;
  return const_cast<std::vector<float>&>(array_of(static_cast<const llama_weights&>(w), t));
}

class weights_source final : public llama_source {
 public:
  explicit weights_source(const llama_weights& w) : w_(w) {}
  const llama_shape& shape() const override { return w_.shape; }
  error read(llama_tensor t, int32_t layer, float* out) const override {
    const auto [rows, cols] = tensor_dims(w_.shape, t);
    const size_t n = size_t(rows * cols);
    const auto& a = array_of(w_, t);
    if (a.size() < (size_t(layer) + 1) * n)
      return make_error(ec::bad_file, std::string{"the weights have no tensor "} + tensor_name(t) +
                                          " of layer " + std::to_string(layer));
    std::memcpy(out, a.data() + size_t(layer) * n, n * sizeof(float));
    return {};
  }
  bool synthetic() const override { return w_.synthetic; }
  std::vector<int32_t> end_ids() const override { return w_.end_ids; }

 private:
  const llama_weights& w_;
};

}  // namespace

const char* tensor_name(llama_tensor t) {
  switch (t) {
    case llama_tensor::embedding:
      return "embedding";
    case llama_tensor::rms_att:
      return "rms_att";
    case llama_tensor::wq:
      return "wq";
    case llama_tensor::wk:
      return "wk";
    case llama_tensor::wv:
      return "wv";
    case llama_tensor::bq:
      return "bq";
    case llama_tensor::bk:
      return "bk";
    case llama_tensor::bv:
      return "bv";
    case llama_tensor::wo:
      return "wo";
    case llama_tensor::rms_ffn:
      return "rms_ffn";
    case llama_tensor::w1:
      return "w1";
    case llama_tensor::w2:
      return "w2";
    case llama_tensor::w3:
      return "w3";
    case llama_tensor::rms_final:
      return "rms_final";
    case llama_tensor::classifier:
      return "classifier";
  }
  return "?";
}

std::pair<int64_t, int64_t> tensor_dims(const llama_shape& s, llama_tensor t) {
  const int64_t d = s.dim, h = s.hidden_dim, q = s.q_dim(), kv = s.kv_dim(), v = s.vocab_size;
  switch (t) {
    case llama_tensor::embedding:
    case llama_tensor::classifier:
      return {v, d};
    case llama_tensor::rms_att:
    case llama_tensor::rms_ffn:
    case llama_tensor::rms_final:
      return {1, d};
    case llama_tensor::wq:
      return {q, d};
    case llama_tensor::wk:
    case llama_tensor::wv:
      return {kv, d};
    case llama_tensor::bq:
      return {1, q};
    case llama_tensor::bk:
    case llama_tensor::bv:
      return {1, kv};
    case llama_tensor::wo:
      return {d, q};
    case llama_tensor::w1:
    case llama_tensor::w3:
      return {h, d};
    case llama_tensor::w2:
      return {d, h};
  }
  return {0, 0};
}

std::unique_ptr<llama_source> source_of(const llama_weights& w) {
  return std::make_unique<weights_source>(w);
}

expected<llama_weights> read_all(const llama_source& source) {
  llama_weights w;
  w.shape = source.shape();
  w.synthetic = source.synthetic();
  w.end_ids = source.end_ids();
  const auto& s = w.shape;
  auto append = [&](llama_tensor t, int32_t layer) -> error {
    const auto [rows, cols] = tensor_dims(s, t);
    auto& a = array_of(w, t);
    const size_t at = a.size();
    a.resize(at + size_t(rows * cols));
    auto err = source.read(t, layer, a.data() + at);
    source.release(t, layer);
    return err;
  };
  if (auto err = append(llama_tensor::embedding, 0)) return err;
  for (int32_t l = 0; l < s.n_layers; ++l)
    for (auto t : layer_tensors)
      if (!is_bias(t) || s.qkv_bias)
        if (auto err = append(t, l)) return err;
  if (auto err = append(llama_tensor::rms_final, 0)) return err;
  if (!s.shared_classifier)
    if (auto err = append(llama_tensor::classifier, 0)) return err;
  return w;
}

}  // namespace conveyor::model
