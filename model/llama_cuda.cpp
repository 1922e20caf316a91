// The Llama network on a CUDA device: weights, KV cache and workspace on "cuda:N", per-step index
// tensors staged in pinned host memory and copied non_blocking, and (CONVEYOR_CUDA_GRAPHS) the
// decode step of each batch-size bucket captured once as a CUDA graph and replayed.
//
// This file compiles only against a CUDA libtorch (CONVEYOR_WITH_CUDA). The CPU network is
// model/llama_torch.cpp, whose plain loops over host memory cannot run on a GPU; this one keeps the
// forward pass in torch operations. NOT YET COMPILED OR RUN: no CUDA libtorch and no GPU were
// available where it was written (scripts/gpu-check.sh builds and runs it on a GPU machine).
#if defined(CONVEYOR_WITH_CUDA)
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <map>
#include <memory>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#if defined(CONVEYOR_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#if defined(CONVEYOR_CUDA_GRAPHS)
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#endif
#endif

#include "model/causal_lm.hpp"

namespace conveyor::model {

namespace {

constexpr float rms_eps = 1e-5f;

/// "cpu", "cuda" (the first GPU) or "cuda:N".
at::Device parse_device(const std::string& name) {
  at::Device dev{name};
  if (dev.is_cuda() && !dev.has_index()) dev.set_index(0);
  return dev;
}

at::Tensor from_floats(const float* data, std::vector<int64_t> sizes) {
  return at::from_blob(const_cast<float*>(data), sizes, at::kFloat).clone();
}

// Per-layer weights, each matrix stored transposed ([in, out]) so that y = x W^T is one mm.
struct layer_weights {
  at::Tensor rms_att;  // [dim]
  at::Tensor wqkv_t;   // [dim, dim + 2 kv_dim]
  at::Tensor wo_t;     // [dim, dim]
  at::Tensor rms_ffn;  // [dim]
  at::Tensor w13_t;    // [dim, 2 hidden]
  at::Tensor w2_t;     // [hidden, dim]
};

class llama_cuda final : public causal_lm {
 public:
  llama_cuda(const llama_weights& w, const runtime_options& opt, int32_t context)
      : shape_(w.shape),
        slots_(opt.slots),
        context_(context),
        synthetic_(w.synthetic),
        device_(opt.device),
        dev_(parse_device(opt.device)) {
    c10::InferenceMode guard;
    const auto& s = shape_;
    const int64_t d = s.dim, h = s.hidden_dim, kv = s.kv_dim(), v = s.vocab_size;
    embedding_ = from_floats(w.token_embedding.data(), {v, d});
    for (int32_t l = 0; l < s.n_layers; ++l) {
      layer_weights lw;
      lw.rms_att = from_floats(w.rms_att.data() + l * d, {d});
      auto wq = at::from_blob(const_cast<float*>(w.wq.data() + l * d * d), {d, d});
      auto wk = at::from_blob(const_cast<float*>(w.wk.data() + l * kv * d), {kv, d});
      auto wv = at::from_blob(const_cast<float*>(w.wv.data() + l * kv * d), {kv, d});
      lw.wqkv_t = at::cat({wq, wk, wv}, 0).t().contiguous();
      lw.wo_t = at::from_blob(const_cast<float*>(w.wo.data() + l * d * d), {d, d}).t().contiguous();
      lw.rms_ffn = from_floats(w.rms_ffn.data() + l * d, {d});
      auto w1 = at::from_blob(const_cast<float*>(w.w1.data() + l * h * d), {h, d});
      auto w3 = at::from_blob(const_cast<float*>(w.w3.data() + l * h * d), {h, d});
      lw.w13_t = at::cat({w1, w3}, 0).t().contiguous();
      lw.w2_t = at::from_blob(const_cast<float*>(w.w2.data() + l * d * h), {d, h}).t().contiguous();
      layers_.push_back(std::move(lw));
    }
    rms_final_ = from_floats(w.rms_final.data(), {d});
    wcls_t_ = from_floats(w.classifier().data(), {v, d}).t().contiguous();

    // Rotary tables: angle = pos * 10000^(-i / head_size) for even i.
    const int64_t hs = s.head_size();
    auto inv_freq = at::pow(10000.0, -at::arange(0, hs, 2, at::kDouble) / static_cast<double>(hs));
    auto angles = at::outer(at::arange(context_, at::kDouble), inv_freq);
    cos_ = angles.cos().to(at::kFloat).contiguous();  // [context, hs/2]
    sin_ = angles.sin().to(at::kFloat).contiguous();

    // The KV cache, [layer][slot, kv_head, position, head] flattened to rows of head_size.
    k_cache_ = at::zeros({s.n_layers, int64_t{slots_} * s.n_kv_heads * context_, hs});
    v_cache_ = at::zeros_like(k_cache_);

    // Workspace for one forward pass of up to `capacity_` tokens, reused by every step.
    capacity_ = std::max({opt.max_batched_tokens, slots_, context_});
    const int64_t n = capacity_;
    ws_tokens_ = at::empty({n}, at::kLong);
    ws_positions_ = at::empty({n}, at::kLong);
    ws_cache_rows_ = at::empty({n * s.n_kv_heads}, at::kLong);
    ws_x_ = at::empty({n, d});
    ws_xb_ = at::empty({n, d});
    ws_sq_ = at::empty({n, d});
    ws_ms_ = at::empty({n, 1});
    ws_qkv_ = at::empty({n, d + 2 * kv});
    ws_q_ = at::empty({n, d});
    ws_k_ = at::empty({n, kv});
    ws_cos_ = at::empty({n, hs / 2});
    ws_sin_ = at::empty({n, hs / 2});
    ws_att_ = at::empty({n, d});
    ws_h_ = at::empty({n, 2 * h});
    ws_hb_ = at::empty({n, h});
    ws_last_ = at::empty({n}, at::kLong);
    ws_xf_ = at::empty({n, d});
    ws_xfn_ = at::empty({n, d});
    ws_msf_ = at::empty({n, 1});
    ws_logits_ = at::empty({n, v});
    // Decode attention: gathered keys and values of every slot, scores and probabilities.
    ws_kg_ = at::empty({int64_t{slots_} * s.n_kv_heads * context_ * hs});
    ws_vg_ = at::empty_like(ws_kg_);
    ws_scores_ = at::empty({int64_t{slots_} * s.n_heads * context_});
    ws_probs_ = at::empty_like(ws_scores_);
    ws_mask_ = at::empty({int64_t{slots_} * context_});
    ws_slots_ = at::empty({slots_}, at::kLong);
    // On the CPU the host buffers are the workspace itself; on a GPU everything moves to the device
    // and the host side gets pinned staging buffers.
    h_tokens_ = ws_tokens_;
    h_positions_ = ws_positions_;
    h_cache_rows_ = ws_cache_rows_;
    h_last_ = ws_last_;
    h_slots_ = ws_slots_;
    h_mask_ = ws_mask_;
    h_logits_ = ws_logits_;
    if (dev_.is_cuda()) move_to_device();
  }

  const llama_shape& shape() const override { return shape_; }
  int32_t slots() const override { return slots_; }
  int32_t context() const override { return context_; }
  bool ignores_end_tokens() const override { return synthetic_; }
  int64_t kv_cache_bytes() const override {
    return 2 * k_cache_.numel() * static_cast<int64_t>(sizeof(float));
  }

  std::string describe() const override {
    std::ostringstream os;
    os << "llama dim=" << shape_.dim << " hidden=" << shape_.hidden_dim
       << " layers=" << shape_.n_layers << " heads=" << shape_.n_heads
       << " kv_heads=" << shape_.n_kv_heads << " vocab=" << shape_.vocab_size << " on " << device_
       << ", " << slots_ << " slots x " << context_ << " tokens, KV cache "
       << kv_cache_bytes() / (1024 * 1024) << " MiB";
    return os.str();
  }

  logits_view prefill(const std::vector<prefill_item>& items) override {
    c10::InferenceMode guard;
    // Group items into passes of at most capacity_ tokens; each item fits alone since
    // capacity_ >= context_.
    rows_out_ = 0;
    size_t first = 0;
    while (first < items.size()) {
      size_t last = first;
      int64_t tokens = 0;
      while (last < items.size() && tokens + items[last].count <= capacity_)
        tokens += items[last++].count;
      prefill_pass(items, first, last, tokens);
      first = last;
    }
    return download(static_cast<int64_t>(items.size()));
  }

  logits_view decode(const std::vector<decode_item>& items) override {
    c10::InferenceMode guard;
    const int64_t n = static_cast<int64_t>(items.size());
#if defined(CONVEYOR_CUDA_GRAPHS)
    if (dev_.is_cuda()) return decode_graph(items);
#endif
    auto* tok = h_tokens_.data_ptr<int64_t>();
    auto* pos = h_positions_.data_ptr<int64_t>();
    auto* last = h_last_.data_ptr<int64_t>();
    auto* slot = h_slots_.data_ptr<int64_t>();
    int64_t span = 0;
    for (int64_t i = 0; i < n; ++i) {
      tok[i] = items[i].token;
      pos[i] = items[i].position;
      slot[i] = items[i].slot;
      last[i] = i;
      span = std::max<int64_t>(span, items[i].position + 1);
    }
    fill_cache_rows(n, [&](int64_t i) { return items[i].slot; });
    // Mask: row i may read positions 0..position_i.
    auto* m = h_mask_.data_ptr<float>();
    const float neg_inf = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < span; ++j) m[i * span + j] = j <= pos[i] ? 0.0f : neg_inf;
    upload(n, n, n * span);
    auto mask = ws_mask_.narrow(0, 0, n * span).view({n, span});
    forward(n, [&](int32_t layer, const at::Tensor& q, at::Tensor& out) {
      decode_attention(layer, n, span, q, mask, out);
    });
    final_logits(n, 0);
    return download(n);
  }

 private:
  template <class SlotOf>
  void fill_cache_rows(int64_t n, SlotOf slot_of) {
    const int64_t kvh = shape_.n_kv_heads;
    auto* rows = h_cache_rows_.data_ptr<int64_t>();
    const auto* pos = h_positions_.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t kh = 0; kh < kvh; ++kh)
        rows[i * kvh + kh] = (slot_of(i) * kvh + kh) * context_ + pos[i];
  }

  void prefill_pass(const std::vector<prefill_item>& items, size_t first, size_t last, int64_t n) {
    wait_for_device();  // the previous pass may still read the staging buffers
    auto* tok = h_tokens_.data_ptr<int64_t>();
    auto* pos = h_positions_.data_ptr<int64_t>();
    auto* lastrow = h_last_.data_ptr<int64_t>();
    std::vector<int64_t> item_of(static_cast<size_t>(n));
    int64_t row = 0;
    for (size_t i = first; i < last; ++i) {
      const auto& it = items[i];
      for (int32_t t = 0; t < it.count; ++t, ++row) {
        tok[row] = it.tokens[t];
        pos[row] = it.start + t;
        item_of[row] = static_cast<int64_t>(i);
      }
      const int32_t at = it.logits_at < 0 ? it.count - 1 : it.logits_at;
      lastrow[i - first] = row - it.count + at;
    }
    fill_cache_rows(n, [&](int64_t r) { return items[item_of[r]].slot; });
    upload(n, static_cast<int64_t>(last - first), 0);
    forward(n, [&](int32_t layer, const at::Tensor& q, at::Tensor& out) {
      int64_t offset = 0;
      for (size_t i = first; i < last; ++i) {
        prefill_attention(layer, items[i], offset, q, out);
        offset += items[i].count;
      }
    });
    final_logits(static_cast<int64_t>(last - first), rows_out_);
    rows_out_ += static_cast<int64_t>(last - first);
  }

  // x = rmsnorm(in) * weight, into out; scratch buffers sized like in.
  static void rmsnorm(at::Tensor& out, const at::Tensor& in, const at::Tensor& weight,
                      at::Tensor& sq, at::Tensor& ms) {
    at::mul_out(sq, in, in);
    at::mean_out(ms, sq, {1}, /*keepdim=*/true);
    ms.add_(rms_eps).rsqrt_();
    at::mul_out(out, in, ms);
    out.mul_(weight);
  }

  // Rotary embedding of [n, heads*hs] (rows may be strided) into dst [n, heads*hs].
  void rope(at::Tensor& dst, const at::Tensor& src, int64_t n, int64_t heads) {
    const int64_t half = shape_.head_size() / 2;
    auto s4 = src.view({n, heads, half, 2});
    auto d4 = dst.view({n, heads, half, 2});
    auto c = ws_cos_.narrow(0, 0, n).unsqueeze(1);
    auto s = ws_sin_.narrow(0, 0, n).unsqueeze(1);
    auto a = s4.select(3, 0), b = s4.select(3, 1);
    auto o0 = d4.select(3, 0), o1 = d4.select(3, 1);
    at::mul_out(o0, a, c);
    o0.addcmul_(b, s, -1);
    at::mul_out(o1, a, s);
    o1.addcmul_(b, c);
  }

  template <class Attention>
  void forward(int64_t n, Attention&& attention) {
    const auto& sh = shape_;
    const int64_t d = sh.dim, kv = sh.kv_dim(), h = sh.hidden_dim, hs = sh.head_size();
    auto tokens = ws_tokens_.narrow(0, 0, n);
    auto positions = ws_positions_.narrow(0, 0, n);
    auto rows = ws_cache_rows_.narrow(0, 0, n * sh.n_kv_heads);
    auto x = ws_x_.narrow(0, 0, n);
    auto xb = ws_xb_.narrow(0, 0, n);
    auto sq = ws_sq_.narrow(0, 0, n);
    auto ms = ws_ms_.narrow(0, 0, n);
    auto qkv = ws_qkv_.narrow(0, 0, n);
    auto q = ws_q_.narrow(0, 0, n);
    auto k = ws_k_.narrow(0, 0, n);
    auto att = ws_att_.narrow(0, 0, n);
    auto hbuf = ws_h_.narrow(0, 0, n);
    auto hb = ws_hb_.narrow(0, 0, n);
    auto cs = ws_cos_.narrow(0, 0, n);
    auto sn = ws_sin_.narrow(0, 0, n);
    at::index_select_out(x, embedding_, 0, tokens);
    at::index_select_out(cs, cos_, 0, positions);
    at::index_select_out(sn, sin_, 0, positions);
    for (int32_t l = 0; l < sh.n_layers; ++l) {
      const auto& lw = layers_[l];
      rmsnorm(xb, x, lw.rms_att, sq, ms);
      at::mm_out(qkv, xb, lw.wqkv_t);
      rope(q, qkv.narrow(1, 0, d), n, sh.n_heads);
      rope(k, qkv.narrow(1, d, kv), n, sh.n_kv_heads);
      // Write this pass's keys and values into the cache rows (slot, kv_head, position).
      k_cache_[l].index_copy_(0, rows, k.reshape({n * sh.n_kv_heads, hs}));
      v_cache_[l].index_copy_(0, rows, qkv.narrow(1, d + kv, kv).reshape({n * sh.n_kv_heads, hs}));
      attention(l, q, att);
      x.addmm_(att, lw.wo_t);
      rmsnorm(xb, x, lw.rms_ffn, sq, ms);
      at::mm_out(hbuf, xb, lw.w13_t);
      at::silu_out(hb, hbuf.narrow(1, 0, h));
      hb.mul_(hbuf.narrow(1, h, h));
      x.addmm_(hb, lw.w2_t);
    }
  }

  // Logits of the rows listed in ws_last_[0..m) into ws_logits_[offset..offset+m).
  void final_logits(int64_t m, int64_t offset) {
    auto xf = ws_xf_.narrow(0, 0, m);
    auto xfn = ws_xfn_.narrow(0, 0, m);
    auto sq = ws_sq_.narrow(0, 0, m);
    auto ms = ws_msf_.narrow(0, 0, m);
    at::index_select_out(xf, ws_x_, 0, ws_last_.narrow(0, 0, m));
    rmsnorm(xfn, xf, rms_final_, sq, ms);
    auto out = ws_logits_.narrow(0, offset, m);
    at::mm_out(out, xfn, wcls_t_);
  }

  // Causal attention of one prompt's tokens over its slot's cache.
  void prefill_attention(int32_t layer, const prefill_item& it, int64_t offset, const at::Tensor& q,
                         at::Tensor& out) {
    const auto& sh = shape_;
    const int64_t t = it.count, hs = sh.head_size(), kvh = sh.n_kv_heads;
    const int64_t g = sh.n_heads / kvh, span = it.start + t;
    // Queries [t, kvh, g, hs] -> [kvh, g*t, hs].
    auto qi = q.narrow(0, offset, t)
                  .view({t, kvh, g, hs})
                  .permute({1, 2, 0, 3})
                  .reshape({kvh, g * t, hs});
    auto keys = k_cache_[layer].view({slots_, kvh, context_, hs})[it.slot].narrow(1, 0, span);
    auto values = v_cache_[layer].view({slots_, kvh, context_, hs})[it.slot].narrow(1, 0, span);
    auto scores = at::bmm(qi, keys.transpose(1, 2)).mul_(1.0 / std::sqrt(double(hs)));
    // Query i (position start+i) reads positions 0..start+i.
    auto causal =
        at::ones({t, span}, at::TensorOptions().dtype(at::kBool).device(dev_)).triu_(it.start + 1);
    scores.view({kvh, g, t, span}).masked_fill_(causal, -std::numeric_limits<float>::infinity());
    auto probs = at::_softmax(scores, -1, false);
    auto o = at::bmm(probs, values);  // [kvh, g*t, hs]
    out.narrow(0, offset, t)
        .view({t, kvh, g, hs})
        .copy_(o.view({kvh, g, t, hs}).permute({2, 0, 1, 3}));
  }

  // Attention of one token per slot, batched over slots with a mask for shorter sequences.
  void decode_attention(int32_t layer, int64_t n, int64_t span, const at::Tensor& q,
                        const at::Tensor& mask, at::Tensor& out) {
    const auto& sh = shape_;
    const int64_t hs = sh.head_size(), kvh = sh.n_kv_heads, g = sh.n_heads / kvh;
    auto slots = ws_slots_.narrow(0, 0, n);
    auto kc = k_cache_[layer].view({slots_, kvh, context_, hs}).narrow(2, 0, span);
    auto vc = v_cache_[layer].view({slots_, kvh, context_, hs}).narrow(2, 0, span);
    auto kg = ws_kg_.narrow(0, 0, n * kvh * span * hs).view({n, kvh, span, hs});
    auto vg = ws_vg_.narrow(0, 0, n * kvh * span * hs).view({n, kvh, span, hs});
    at::index_select_out(kg, kc, 0, slots);
    at::index_select_out(vg, vc, 0, slots);
    auto scores = ws_scores_.narrow(0, 0, n * kvh * g * span).view({n * kvh, g, span});
    auto probs = ws_probs_.narrow(0, 0, n * kvh * g * span).view({n * kvh, g, span});
    at::bmm_out(scores, q.view({n * kvh, g, hs}), kg.view({n * kvh, span, hs}).transpose(1, 2));
    scores.mul_(1.0 / std::sqrt(double(hs)));
    scores.view({n, kvh * g, span}).add_(mask.view({n, 1, span}));
    at::_softmax_out(probs, scores, -1, false);
    auto att = out.view({n * kvh, g, hs});
    at::bmm_out(att, probs, vg.view({n * kvh, span, hs}));
  }

  // -- devices
  // -------------------------------------------------------------------------------------

  /// Moves weights, KV cache and workspace to dev_; the host gets pinned staging buffers.
  void move_to_device() {
#if defined(CONVEYOR_WITH_CUDA)
    c10::cuda::CUDAGuard guard{dev_};
    auto to_dev = [&](at::Tensor& t) { t = t.to(dev_); };
    for (auto* t : {&embedding_, &rms_final_, &wcls_t_, &cos_, &sin_, &k_cache_, &v_cache_})
      to_dev(*t);
    for (auto& lw : layers_)
      for (auto* t : {&lw.rms_att, &lw.wqkv_t, &lw.wo_t, &lw.rms_ffn, &lw.w13_t, &lw.w2_t})
        to_dev(*t);
    auto pinned = [](const at::Tensor& like) {
      return at::empty(like.sizes(), like.options().pinned_memory(true));
    };
    h_tokens_ = pinned(ws_tokens_);
    h_positions_ = pinned(ws_positions_);
    h_cache_rows_ = pinned(ws_cache_rows_);
    h_last_ = pinned(ws_last_);
    h_slots_ = pinned(ws_slots_);
    h_mask_ = pinned(ws_mask_);
    h_logits_ = pinned(ws_logits_);
    for (auto* t :
         {&ws_tokens_, &ws_positions_, &ws_cache_rows_, &ws_x_,    &ws_xb_,   &ws_sq_,     &ws_ms_,
          &ws_qkv_,    &ws_q_,         &ws_k_,          &ws_cos_,  &ws_sin_,  &ws_att_,    &ws_h_,
          &ws_hb_,     &ws_last_,      &ws_xf_,         &ws_xfn_,  &ws_msf_,  &ws_logits_, &ws_kg_,
          &ws_vg_,     &ws_scores_,    &ws_probs_,      &ws_mask_, &ws_slots_})
      to_dev(*t);
    at::cuda::getCurrentCUDAStream(dev_.index()).synchronize();
#else
    throw std::runtime_error("device " + device_ + " needs a CUDA build of libtorch");
#endif
  }

  /// Copies the first `rows` tokens/positions (and their cache rows), `outputs` logit rows and
  /// slots, and `mask` mask elements from the host buffers to the device (nothing on the CPU).
  void upload(int64_t rows, int64_t outputs, int64_t mask) {
    if (!dev_.is_cuda()) return;
    auto copy = [](at::Tensor& dst, const at::Tensor& src, int64_t count) {
      if (count > 0) dst.narrow(0, 0, count).copy_(src.narrow(0, 0, count), /*non_blocking=*/true);
    };
    copy(ws_tokens_, h_tokens_, rows);
    copy(ws_positions_, h_positions_, rows);
    copy(ws_cache_rows_, h_cache_rows_, rows * shape_.n_kv_heads);
    copy(ws_last_, h_last_, outputs);
    copy(ws_slots_, h_slots_, std::min<int64_t>(outputs, slots_));
    copy(ws_mask_, h_mask_, mask);
  }

  /// The first `rows` rows of logits, readable on the host (a blocking copy on a GPU).
  logits_view download(int64_t rows) {
    if (dev_.is_cuda()) h_logits_.narrow(0, 0, rows).copy_(ws_logits_.narrow(0, 0, rows));
    return {h_logits_.data_ptr<float>(), static_cast<int32_t>(rows), shape_.vocab_size};
  }

  /// Waits until the device finished what was queued (nothing to wait for on the CPU).
  void wait_for_device() {
#if defined(CONVEYOR_WITH_CUDA)
    if (dev_.is_cuda()) at::cuda::getCurrentCUDAStream(dev_.index()).synchronize();
#endif
  }

#if defined(CONVEYOR_CUDA_GRAPHS)
  // -- CUDA graphs of the decode step ----------------------------------------------------------
  //
  // A graph needs fixed shapes: a batch of n runs as the bucket b >= n (1, 2, 4, ... capped at
  // slots_), its extra rows repeating item 0 (they write the same key and value to the same cache
  // row again, and their logits are ignored), and attention spans the whole context under the
  // mask. A bucket is captured on first use (the warm-up run computes that step) and replayed.

  static int64_t bucket_of(int64_t n, int64_t slots) {
    int64_t b = 1;
    while (b < n) b *= 2;
    return std::min(b, slots);
  }

  logits_view decode_graph(const std::vector<decode_item>& items) {
    c10::cuda::CUDAGuard guard{dev_};
    const int64_t n = static_cast<int64_t>(items.size());
    const int64_t b = bucket_of(n, slots_);
    const int64_t span = context_;
    auto* tok = h_tokens_.data_ptr<int64_t>();
    auto* pos = h_positions_.data_ptr<int64_t>();
    auto* last = h_last_.data_ptr<int64_t>();
    auto* slot = h_slots_.data_ptr<int64_t>();
    auto* m = h_mask_.data_ptr<float>();
    const float neg_inf = -std::numeric_limits<float>::infinity();
    wait_for_device();  // the previous replay may still read the staging buffers
    for (int64_t i = 0; i < b; ++i) {
      // Padding repeats item 0: it writes the same key and value to the same cache row again.
      const auto& it = items[size_t(i < n ? i : 0)];
      tok[i] = it.token;
      pos[i] = it.position;
      slot[i] = it.slot;
      last[i] = i;
      for (int64_t j = 0; j < span; ++j) m[i * span + j] = j <= it.position ? 0.0f : neg_inf;
    }
    fill_cache_rows(b, [&](int64_t i) { return items[size_t(i < n ? i : 0)].slot; });
    upload(b, b, b * span);
    auto& graph = graphs_[b];
    if (!graph) {
      // Warm up on a side stream (cuBLAS handles, allocator), then capture.
      auto side = at::cuda::getStreamFromPool(false, dev_.index());
      // The side stream waits for the work queued so far (CUDAStream has no wait_stream).
      at::cuda::CUDAEvent queued;
      queued.record(at::cuda::getCurrentCUDAStream(dev_.index()));
      queued.block(side);
      {
        c10::cuda::CUDAStreamGuard sg{side};
        decode_body(b, span);
        graph = std::make_unique<at::cuda::CUDAGraph>();
        graph->capture_begin();
        decode_body(b, span);
        graph->capture_end();
      }
      at::cuda::CUDAEvent captured;
      captured.record(side);
      captured.block(at::cuda::getCurrentCUDAStream(dev_.index()));
    } else {
      graph->replay();
    }
    return download(n);
  }

  void decode_body(int64_t b, int64_t span) {
    auto mask = ws_mask_.narrow(0, 0, b * span).view({b, span});
    forward(b, [&](int32_t layer, const at::Tensor& q, at::Tensor& out) {
      decode_attention(layer, b, span, q, mask, out);
    });
    final_logits(b, 0);
  }

  std::map<int64_t, std::unique_ptr<at::cuda::CUDAGraph>> graphs_;
#endif

  llama_shape shape_;
  int32_t slots_;
  int32_t context_;
  bool synthetic_;
  std::string device_;
  at::Device dev_;
  int64_t capacity_ = 0;
  int64_t rows_out_ = 0;
  at::Tensor embedding_, rms_final_, wcls_t_, cos_, sin_, k_cache_, v_cache_;
  std::vector<layer_weights> layers_;
  at::Tensor ws_tokens_, ws_positions_, ws_cache_rows_, ws_x_, ws_xb_, ws_sq_, ws_ms_, ws_qkv_,
      ws_q_, ws_k_, ws_cos_, ws_sin_, ws_att_, ws_h_, ws_hb_, ws_last_, ws_xf_, ws_xfn_, ws_msf_,
      ws_logits_, ws_kg_, ws_vg_, ws_scores_, ws_probs_, ws_mask_, ws_slots_;
  // Host side of the per-step inputs and of the logits: the ws_ tensors themselves on the CPU,
  // pinned copies on a GPU.
  at::Tensor h_tokens_, h_positions_, h_cache_rows_, h_last_, h_slots_, h_mask_, h_logits_;
};

}  // namespace

expected<std::unique_ptr<causal_lm>> make_llama_cuda(const llama_weights& weights,
                                                     const runtime_options& options,
                                                     int32_t context) {
  // "cuda" is the first GPU, "cuda:N" the N-th; at::Device parses both.
  const at::Device dev = parse_device(options.device);
  if (!at::hasCUDA() || dev.index() >= int(at::getNumGPUs()))
    return make_error(ec::bad_config, "device '" + options.device + "' is not available: " +
                                        std::to_string(at::getNumGPUs()) +
                                        " CUDA device(s) visible");
  try {
    std::unique_ptr<causal_lm> result = std::make_unique<llama_cuda>(weights, options, context);
    return result;
  } catch (const std::exception& e) {
    return make_error(ec::model_failure, std::string{"cannot build the model: "} + e.what());
  }
}

}  // namespace conveyor::model

#endif  // CONVEYOR_WITH_CUDA
