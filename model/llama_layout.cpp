// The shared weight layout of the Llama networks.
#include "model/llama_layout.hpp"

#include <cmath>
#include <tuple>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

namespace conveyor::model {

namespace {

at::Tensor view_of(const float* data, std::vector<int64_t> sizes) {
  return at::from_blob(const_cast<float*>(data), sizes, at::kFloat);
}

}  // namespace

llama_tensors lay_out_llama(const llama_weights& w, int32_t context) {
  c10::InferenceMode guard;
  const auto& s = w.shape;
  const int64_t d = s.dim, h = s.hidden_dim, q = s.q_dim(), kv = s.kv_dim(), v = s.vocab_size;
  llama_tensors t;
  t.embedding = view_of(w.token_embedding.data(), {v, d}).clone();
  for (int64_t l = 0; l < s.n_layers; ++l) {
    llama_layer_tensors lw;
    auto rms_att = view_of(w.rms_att.data() + l * d, {d});
    auto wq = view_of(w.wq.data() + l * q * d, {q, d});
    auto wk = view_of(w.wk.data() + l * kv * d, {kv, d});
    auto wv = view_of(w.wv.data() + l * kv * d, {kv, d});
    // RMSNorm's weight scales the inputs of the matrix that follows it: folded into its rows.
    lw.wqkv_t = at::cat({wq, wk, wv}, 0).t().contiguous().mul_(rms_att.unsqueeze(1));
    if (s.qkv_bias)
      lw.bqkv = at::cat({view_of(w.bq.data() + l * q, {q}), view_of(w.bk.data() + l * kv, {kv}),
                         view_of(w.bv.data() + l * kv, {kv})});
    lw.wo_t = view_of(w.wo.data() + l * d * q, {d, q}).t().contiguous();
    auto rms_ffn = view_of(w.rms_ffn.data() + l * d, {d});
    auto w1 = view_of(w.w1.data() + l * h * d, {h, d});
    auto w3 = view_of(w.w3.data() + l * h * d, {h, d});
    lw.w13_t = at::cat({w1, w3}, 0).t().contiguous().mul_(rms_ffn.unsqueeze(1));
    lw.w2_t = view_of(w.w2.data() + l * d * h, {d, h}).t().contiguous();
    t.layers.push_back(std::move(lw));
  }
  auto rms_final = view_of(w.rms_final.data(), {d});
  t.wcls_t = view_of(w.classifier().data(), {v, d}).t().contiguous().mul_(rms_final.unsqueeze(1));

  std::tie(t.cos, t.sin) = rotary_tables(s, context);
  return t;
}

std::pair<at::Tensor, at::Tensor> rotary_tables(const llama_shape& s, int32_t context) {
  c10::InferenceMode guard;
  auto frequencies = rotary_frequencies(s);
  auto inv_freq = at::from_blob(frequencies.data(), {int64_t(frequencies.size())}, at::kDouble);
  auto angles = at::outer(at::arange(int64_t{context}, at::kDouble), inv_freq);
  return {angles.cos().to(at::kFloat).contiguous(), angles.sin().to(at::kFloat).contiguous()};
}

std::vector<double> rotary_frequencies(const llama_shape& s) {
  const int32_t hs = s.head_size();
  std::vector<double> f(static_cast<size_t>(hs / 2));
  for (int32_t j = 0; j < hs / 2; ++j) f[size_t(j)] = std::pow(s.rope_theta, -2.0 * j / hs);
  if (s.rope_factors.size() == f.size())
    for (size_t j = 0; j < f.size(); ++j) f[j] /= double(s.rope_factors[j]);
  const auto& r = s.rope_scaling;
  if (r.factor <= 0.0) return f;
  // Llama 3: long wavelengths slowed by `factor`, short ones kept, a smooth blend between.
  const double pi = 3.14159265358979323846;
  const double old_context = r.original_max_position_embeddings;
  const double low_freq_wavelen = old_context / r.low_freq_factor;
  const double high_freq_wavelen = old_context / r.high_freq_factor;
  for (auto& x : f) {
    const double wavelen = 2 * pi / x;
    if (wavelen < high_freq_wavelen) continue;
    if (wavelen > low_freq_wavelen) {
      x /= r.factor;
      continue;
    }
    const double smooth =
        (old_context / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
    x = (1 - smooth) * x / r.factor + smooth * x;
  }
  return f;
}

}  // namespace conveyor::model
