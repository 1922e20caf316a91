// The Llama network of the CPU in plain loops between libtorch's matrix products: RMSNorm,
// rotary embedding, grouped-query attention, SwiGLU, over a KV cache reserved once. For a small
// model on a CPU the dispatch of many small torch operations costs more than their arithmetic;
// the network of torch operations for any device is model/llama_ops.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "model/causal_lm.hpp"
#include "model/llama_base.hpp"
#include "model/forward_pass.hpp"
#include "model/llama_layout.hpp"
#include "model/packed_matmul.hpp"
#include "model/parallel_grain.hpp"
#include "model/work_pool.hpp"

namespace conveyor::model {

namespace {

// The eight-wide vector helpers below are internal (inlined, never called across a library
// boundary), so the ABI note GCC gives for vector returns without AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

// The plain loops below are compiled twice on x86-64: for the baseline and for x86-64-v3
// (AVX2 + FMA); the loader picks what the processor runs. Other targets get the baseline.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CONVEYOR_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CONVEYOR_VECTOR_CLONES
#endif

class llama_loops final : public llama_base {
 public:
  llama_loops(const llama_weights& w, const runtime_options& opt, int32_t context)
      : llama_base(w, opt, context,
                   opt.dtype == compute_dtype::bf16
                       ? "plain loops, bf16 weights, f32 activations and KV cache"
                       : "plain loops"),
        weights_(lay_out_llama(w, context)) {
    c10::InferenceMode guard;
    const auto& s = shape_;
    // Each matrix packed once in the kernel's layout; the unpacked copies are dropped.
    const auto format =
        opt.dtype == compute_dtype::bf16 ? weight_format::bf16 : weight_format::f32;
    auto pack = [&](at::Tensor& t) {
      packed_matrix p(t.data_ptr<float>(), t.size(0), t.size(1), t.stride(0), format);
      t = at::Tensor();
      return p;
    };
    for (auto& lw : weights_.layers)
      packed_.push_back({pack(lw.wqkv_t), pack(lw.wo_t), pack(lw.w13_t), pack(lw.w2_t)});
    classifier_ = pack(weights_.wcls_t);
    const int64_t d = s.dim, h = s.hidden_dim, q = s.q_dim(), kv = s.kv_dim(), v = s.vocab_size;
    const int64_t hs = s.head_size();

    // The KV cache per layer. Keys in blocks of eight positions, each block transposed:
    // [slot, kv_head, position / 8, head element, position % 8], so that the scores of a query
    // over eight positions are eight lanes of one register, summed over the head's elements
    // from one contiguous run of the cache (key_blocks_ blocks per head, context rounded up).
    // Values as [slot, kv_head, position, head element], so that the weighted sum is contiguous.
    key_blocks_ = (context_ + 7) / 8;
    k_cache_ = at::zeros({s.n_layers, int64_t{slots_} * s.n_kv_heads * key_blocks_ * 8 * hs});
    v_cache_ = at::zeros({s.n_layers, int64_t{slots_} * s.n_kv_heads * context_, hs});

    // Workspace for one forward pass of up to `capacity_` tokens, reused by every step.
    capacity_ = std::max({opt.max_batched_tokens, slots_, context_});
    const int64_t n = capacity_;
    ws_tokens_ = at::empty({n}, at::kLong);
    ws_positions_ = at::empty({n}, at::kLong);
    ws_cache_rows_ = at::empty({n * s.n_kv_heads}, at::kLong);
    ws_x_ = at::empty({n, d});
    ws_xb_ = at::empty({n, d});
    ws_qkv_ = at::empty({n, q + 2 * kv});
    ws_qk_ = at::empty({n, q + kv});
    ws_att_ = at::empty({n, q});
    ws_h_ = at::empty({n, 2 * h});
    ws_hb_ = at::empty({n, h});
    ws_last_ = at::empty({n}, at::kLong);
    ws_xf_ = at::empty({n, d});
    ws_xfn_ = at::empty({n, d});
    ws_logits_ = at::empty({n, v});
    ws_slots_ = at::empty({n}, at::kLong);  // the slot of each row; -1: not attended here
  }

  logits_view prefill(const std::vector<prefill_item>& items) override {
    c10::InferenceMode guard;
    // Each item fits in a pass alone since capacity_ >= context_.
    rows_out_ = 0;
    // Every position of long prompts may outgrow the workspace's rows: a larger buffer then.
    const int64_t rows = logits_rows(items);
    if (rows > ws_logits_.size(0)) ws_logits_ = at::empty({rows, int64_t{shape_.vocab_size}});
    for_each_pass(items, capacity_, [&](const forward_pass& pass) { prefill_pass(items, pass); });
    return {ws_logits_.data_ptr<float>(), static_cast<int32_t>(rows), shape_.vocab_size};
  }

  logits_view decode(const std::vector<decode_item>& items) override {
    // A decode step is a prefill of one token per sequence.
    decode_as_prefill_.clear();
    for (const auto& it : items)
      decode_as_prefill_.push_back({it.slot, it.position, &it.token, 1, -1});
    return prefill(decode_as_prefill_);
  }

  // The cache holds float32 whatever the weights' format.
  int64_t kv_cache_bytes() const override {
    return conveyor::model::kv_cache_bytes(shape_, slots_, context_, compute_dtype::f32);
  }

  bool copies_prefixes() const override { return true; }

  void copy_prefix(int32_t from, int32_t to, int32_t tokens) override {
    c10::InferenceMode guard;
    const int64_t hs = shape_.head_size(), kvh = shape_.n_kv_heads;
    for (int64_t l = 0; l < shape_.n_layers; ++l) {
      // Keys in blocks of eight positions: the blocks that hold the first `tokens` (positions
      // past them in the last block are rewritten before anything reads them).
      auto keys = k_cache_[l].view({slots_, kvh, key_blocks_, 8 * hs});
      const int64_t blocks = (int64_t{tokens} + 7) / 8;
      keys[to].narrow(1, 0, blocks).copy_(keys[from].narrow(1, 0, blocks));
      auto values = v_cache_[l].view({slots_, kvh, context_, hs});
      values[to].narrow(1, 0, tokens).copy_(values[from].narrow(1, 0, tokens));
    }
  }

 private:
  void prefill_pass(const std::vector<prefill_item>& items, const forward_pass& pass) {
    const size_t first = pass.first, last = pass.last;
    const int64_t n = pass.tokens;
    auto* slot = ws_slots_.data_ptr<int64_t>();
    const int64_t outputs =
        lay_out_rows(items, pass, shape_.n_kv_heads, context_,
                     {ws_tokens_.data_ptr<int64_t>(), ws_positions_.data_ptr<int64_t>(),
                      ws_cache_rows_.data_ptr<int64_t>(), ws_last_.data_ptr<int64_t>(), slot});
    // Short prompts go through the row loop; long ones through matrix products (slot -1 here).
    int64_t row = 0;
    for (size_t i = first; i < last; ++i) {
      const bool by_rows = attends_by_rows(items[i]);
      for (int32_t t = 0; t < items[i].count; ++t, ++row)
        if (!by_rows) slot[row] = -1;
    }
    forward(n, [&](int32_t layer, const at::Tensor& q, at::Tensor& out) {
      rows_attention(layer, n, q, out);
      int64_t offset = 0;
      for (size_t i = first; i < last; ++i) {
        if (!attends_by_rows(items[i]))
          prefill_attention(layer, items[i], offset, q, out);
        offset += items[i].count;
      }
    });
    final_logits(outputs, rows_out_);
    rows_out_ += outputs;
  }

  template <class Attention>
  void forward(int64_t n, Attention&& attention) {
    const auto& sh = shape_;
    const int64_t q = sh.q_dim(), kv = sh.kv_dim(), h = sh.hidden_dim;
    auto x = ws_x_.narrow(0, 0, n);
    auto xb = ws_xb_.narrow(0, 0, n);
    auto qkv = ws_qkv_.narrow(0, 0, n);
    auto qk = ws_qk_.narrow(0, 0, n);
    auto att = ws_att_.narrow(0, 0, n);
    auto hbuf = ws_h_.narrow(0, 0, n);
    auto hb = ws_hb_.narrow(0, 0, n);
    // Between the matrix products, plain loops: for a small model the dispatch of many small
    // torch operations cost more than their arithmetic.
    embed(x, n);
    for (int32_t l = 0; l < sh.n_layers; ++l) {
      const auto& lw = weights_.layers[l];
      const auto& pw = packed_[size_t(l)];
      rmsnorm(xb, x, n);
      multiply(pw.wqkv, xb, qkv, n, lw.bqkv.defined() ? lw.bqkv.data_ptr<float>() : nullptr);
      // Queries and keys share the rotary tables: one pass over both, into qk = [q | k].
      rope(qk, qkv, n, sh.n_heads + sh.n_kv_heads);
      write_cache(l, n, qk.narrow(1, q, kv), qkv.narrow(1, q + kv, kv));
      attention(l, qk.narrow(1, 0, q), att);
      multiply(pw.wo, att, x, n, nullptr, true);
      rmsnorm(xb, x, n);
      multiply(pw.w13, xb, hbuf, n);
      swiglu(hb, hbuf, n, h);
      multiply(pw.w2, hb, x, n, nullptr, true);
    }
  }

  // The first n rows of out = in W (+ bias), or out += in W with `accumulate`.
  static void multiply(const packed_matrix& w, const at::Tensor& in, at::Tensor& out, int64_t n,
                       const float* bias = nullptr, bool accumulate = false) {
    w.multiply(in.data_ptr<float>(), in.stride(0), n, out.data_ptr<float>(), out.stride(0), bias,
               accumulate);
  }

  // Rows of the token embedding into x.
  void embed(at::Tensor& x, int64_t n) {
    const int64_t d = shape_.dim;
    const auto* tok = ws_tokens_.data_ptr<int64_t>();
    const float* table = weights_.embedding.data_ptr<float>();
    float* out = x.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(out + i * d, table + tok[i] * d, size_t(d) * sizeof(float));
  }

  // Runs f(begin, end) over [0, n) rows, in parallel when each row has `row_cost` work.
  template <class F>
  static void over_rows(int64_t n, int64_t row_cost, F&& f) {
    const int64_t grain = grain_for(row_cost);
    parallel_for(n, grain, f);
  }

  // out = in / rms(in), row by row (rows of `in` contiguous). The norm's weight is folded into
  // the next matrix.
  void rmsnorm(at::Tensor& out, const at::Tensor& in, int64_t n) {
    const int64_t d = in.size(1);
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const float eps = shape_.rms_norm_eps;
    over_rows(n, d, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* x = src + i * d;
        float ss = 0.0f;
        for (int64_t e = 0; e < d; ++e) ss += x[e] * x[e];
        const float inv = 1.0f / std::sqrt(ss / float(d) + eps);
        float* y = dst + i * d;
        for (int64_t e = 0; e < d; ++e) y[e] = x[e] * inv;
      }
    });
  }

  // Rotary embedding of the first heads*hs columns of src (rows strided) into dst (contiguous
  // [n, heads*hs]): pairs (2j, 2j+1) of each head turn by the angles of the rotary tables.
  void rope(at::Tensor& dst, const at::Tensor& src, int64_t n, int64_t heads) {
    const int64_t hs = shape_.head_size(), half = hs / 2, width = heads * hs;
    const int64_t src_stride = src.stride(0);
    const float* in = src.data_ptr<float>();
    float* out = dst.data_ptr<float>();
    const float* cos_table = weights_.cos.data_ptr<float>();
    const float* sin_table = weights_.sin.data_ptr<float>();
    const auto* pos = ws_positions_.data_ptr<int64_t>();
    over_rows(n, width, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* c = cos_table + pos[i] * half;
        const float* s = sin_table + pos[i] * half;
        const float* a = in + i * src_stride;
        float* y = out + i * width;
        for (int64_t head = 0; head < heads; ++head)
          for (int64_t j = 0; j < half; ++j) {
            const int64_t e = head * hs + 2 * j;
            const float x0 = a[e], x1 = a[e + 1];
            y[e] = x0 * c[j] - x1 * s[j];
            y[e + 1] = x0 * s[j] + x1 * c[j];
          }
      }
    });
  }

  // out = silu(h1) * h3, where h = [h1 | h3] row by row.
  static void swiglu(at::Tensor& out, const at::Tensor& h, int64_t n, int64_t hidden) {
    const float* in = h.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    over_rows(n, hidden, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* h1 = in + i * 2 * hidden;
        swiglu_row(h1, h1 + hidden, dst + i * hidden, hidden);
      }
    });
  }

  // y = silu(h1) * h3 over n elements, eight at a time: silu(x) = x sigmoid(x), with the
  // sigmoid from e = exp(-|x|) <= 1 (1 / (1 + e) for x >= 0, e / (1 + e) below), so that the
  // exponential never overflows and vectorizes (std::exp does not without -ffast-math).
  CONVEYOR_VECTOR_CLONES static void swiglu_row(const float* __restrict__ h1,
                                                const float* __restrict__ h3,
                                                float* __restrict__ y, int64_t n) {
    const int64_t body = n - n % 8;
    for (int64_t e = 0; e < body; e += 8) {
      const v8f x = load8(h1 + e);
      const v8f negative_abs = x < 0.0f ? x : -x;
      const v8f ex = exp8_nonpositive(negative_abs);
      const v8f sigmoid = (x < 0.0f ? ex : ex * 0.0f + 1.0f) / (1.0f + ex);
      store8(y + e, x * sigmoid * load8(h3 + e));
    }
    for (int64_t e = body; e < n; ++e) {
      const float x = h1[e], ex = exp_nonpositive(-std::abs(x));
      y[e] = x * ((x < 0.0f ? ex : 1.0f) / (1.0f + ex)) * h3[e];
    }
  }

  // Logits of the rows listed in ws_last_[0..m) into ws_logits_[offset..offset+m).
  void final_logits(int64_t m, int64_t offset) {
    const int64_t d = shape_.dim;
    const auto* rows = ws_last_.data_ptr<int64_t>();
    const float* x = ws_x_.data_ptr<float>();
    float* xf = ws_xf_.data_ptr<float>();
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(xf + i * d, x + rows[i] * d, size_t(d) * sizeof(float));
    auto xfn = ws_xfn_.narrow(0, 0, m);
    rmsnorm(xfn, ws_xf_, m);
    auto out = ws_logits_.narrow(0, offset, m);
    multiply(classifier_, xfn, out, m);
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
    // [kvh, blocks, hs, 8] -> [kvh, hs, span].
    const int64_t blocks = (span + 7) / 8;
    auto keys_t = k_cache_[layer]
                      .view({slots_, kvh, key_blocks_, hs, 8})[it.slot]
                      .narrow(1, 0, blocks)
                      .permute({0, 2, 1, 3})
                      .reshape({kvh, hs, blocks * 8})
                      .narrow(2, 0, span);
    auto values = v_cache_[layer].view({slots_, kvh, context_, hs})[it.slot].narrow(1, 0, span);
    auto scores = at::bmm(qi, keys_t).mul_(1.0 / std::sqrt(double(hs)));
    // Query i (position start+i) reads positions 0..start+i.
    auto causal = at::ones({t, span}, at::kBool).triu_(it.start + 1);
    scores.view({kvh, g, t, span}).masked_fill_(causal, -std::numeric_limits<float>::infinity());
    auto probs = at::_softmax(scores, -1, false);
    auto o = at::bmm(probs, values);  // [kvh, g*t, hs]
    out.narrow(0, offset, t)
        .view({t, kvh, g, hs})
        .copy_(o.view({kvh, g, t, hs}).permute({2, 0, 1, 3}));
  }

  // Copies this pass's keys and values (rows of [n, kv_dim], possibly strided) into the cache
  // rows of (slot, kv_head, position) listed in ws_cache_rows_.
  void write_cache(int32_t layer, int64_t n, const at::Tensor& k, const at::Tensor& v) {
    const int64_t hs = shape_.head_size(), kvh = shape_.n_kv_heads, kb = key_blocks_;
    const auto* rows = ws_cache_rows_.data_ptr<int64_t>();
    const auto* pos = ws_positions_.data_ptr<int64_t>();
    float* kc = k_cache_[layer].data_ptr<float>();
    float* vc = v_cache_[layer].data_ptr<float>();
    const float* kp = k.data_ptr<float>();
    const float* vp = v.data_ptr<float>();
    const int64_t ks = k.stride(0), vs = v.stride(0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < kvh; ++h) {
        // rows[] = (slot * kvh + h) * context_ + position.
        const int64_t row = rows[i * kvh + h];
        const int64_t head = (row - pos[i]) / context_;
        float* block = kc + ((head * kb + pos[i] / 8) * hs) * 8 + pos[i] % 8;
        const float* key = kp + i * ks + h * hs;
        for (int64_t e = 0; e < hs; ++e) block[e * 8] = key[e];
        std::memcpy(vc + row * hs, vp + i * vs + h * hs, size_t(hs) * sizeof(float));
      }
  }

  // Attention of each row (one token of a sequence) over its slot's cache, positions
  // 0..position; rows whose slot is -1 are skipped. A plain loop: it reads the cache in place
  // (no gather, no mask) and replaces seven torch operations per layer, whose dispatch cost
  // dominated a step of a small model. Causal by construction: a row reads only positions up to
  // its own, and the whole pass's keys are in the cache before any row attends.
  void rows_attention(int32_t layer, int64_t n, const at::Tensor& q, at::Tensor& out) {
    const int64_t hs = shape_.head_size(), kvh = shape_.n_kv_heads, heads = shape_.n_heads;
    const int64_t g = heads / kvh;
    const float* kc = k_cache_[layer].data_ptr<float>();
    const float* vc = v_cache_[layer].data_ptr<float>();
    const float* qp = q.data_ptr<float>();
    const int64_t q_stride = q.stride(0);
    float* op = out.data_ptr<float>();
    const auto* pos = ws_positions_.data_ptr<int64_t>();
    const auto* slot = ws_slots_.data_ptr<int64_t>();
    const float scale = 1.0f / std::sqrt(float(hs));
    const int64_t ctx = key_blocks_ * 8;  // positions per head in the key cache; scores' stride
    int64_t longest = 1;
    for (int64_t i = 0; i < n; ++i) longest = std::max(longest, pos[i] + 1);
    const int64_t grain = grain_for(longest * hs * g);
    // One task per (row, kv head): the g query heads that share a kv head read its keys and
    // values once.
    parallel_for(n * kvh, grain, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> scores;
      if (int64_t(scores.size()) < ctx * g + 8) scores.resize(size_t(ctx * g + 8));
      for (int64_t r = begin; r < end; ++r) {
        const int64_t i = r / kvh, kh = r % kvh;
        if (slot[i] < 0) continue;
        const int64_t head = slot[i] * kvh + kh;
        attend_dispatch(hs, qp + i * q_stride + kh * g * hs, g, kc + head * ctx * hs, ctx,
                        vc + head * context_ * hs, pos[i] + 1, scale, scores.data(),
                        op + (i * heads + kh * g) * hs);
      }
    });
  }

  // Calls attend<HS> with the head size known at compile time for the common sizes, so that
  // the inner loops unroll and vectorize; other sizes take the general loop.
  static void attend_dispatch(int64_t hs, const float* q, int64_t g, const float* keys_t,
                              int64_t ctx, const float* values, int64_t span, float scale,
                              float* scores, float* out) {
#define CONVEYOR_ATTEND(HS) attend<HS>(q, g, keys_t, ctx, values, span, scale, scores, out)
    switch (hs) {
      case 8:
        return CONVEYOR_ATTEND(8);
      case 16:
        return CONVEYOR_ATTEND(16);
      case 32:
        return CONVEYOR_ATTEND(32);
      case 48:
        return CONVEYOR_ATTEND(48);
      case 64:
        return CONVEYOR_ATTEND(64);
      case 96:
        return CONVEYOR_ATTEND(96);
      case 128:
        return CONVEYOR_ATTEND(128);
      default:
        return attend_scalar(hs, q, g, keys_t, ctx, values, span, scale, scores, out);
    }
#undef CONVEYOR_ATTEND
  }

  // Softmax attention of g query heads (q: g x hs, contiguous) over `span` positions of one kv
  // head: keys in blocks of eight positions (hs x 8 each, contiguous), values (span x hs,
  // contiguous); into out (g x hs). Rows of `scores` are ctx (a multiple of 8) apart. HS > 0
  // fixes hs at compile time. Every inner loop runs over contiguous memory.
  // The same with eight-wide vectors (GCC vector extensions, so that it vectorizes whatever the
  // optimizer decides) for head sizes that are multiples of 8.
  template <int HS>
  CONVEYOR_VECTOR_CLONES static void attend(const float* __restrict__ q, int64_t g,
                                            const float* __restrict__ keys_t, int64_t ctx,
                                            const float* __restrict__ values, int64_t span,
                                            float scale, float* __restrict__ scores,
                                            float* __restrict__ out) {
    static_assert(HS % 8 == 0, "vector attention needs a head size that is a multiple of 8");
    constexpr int64_t blocks = HS / 8;
    const int64_t body = span - span % 8;
    // Scores of the g heads, eight positions at a time: a block of keys is HS runs of eight
    // positions, so the eight scores stay in registers (four partial sums, for the multiply-add
    // latency) and the whole pass reads the head's keys as one contiguous run. The last block
    // may hold positions past `span` (stale or zero): their lanes are written and ignored.
    for (int64_t t0 = 0; t0 < span; t0 += 8) {
      const float* block = keys_t + t0 * HS;
      for (int64_t j = 0; j < g; ++j) {
        const float* qj = q + j * HS;
        v8f acc0 = {}, acc1 = {}, acc2 = {}, acc3 = {};
        for (int64_t e = 0; e < HS; e += 4) {
          acc0 += qj[e] * load8(block + 8 * e);
          acc1 += qj[e + 1] * load8(block + 8 * (e + 1));
          acc2 += qj[e + 2] * load8(block + 8 * (e + 2));
          acc3 += qj[e + 3] * load8(block + 8 * (e + 3));
        }
        store8(scores + j * ctx + t0, ((acc0 + acc1) + (acc2 + acc3)) * scale);
      }
    }
    for (int64_t j = 0; j < g; ++j) {
      float* sj = scores + j * ctx;
      v8f top8 = load8(sj);
      for (int64_t t = 8; t < body; t += 8) {
        const v8f x = load8(sj + t);
        top8 = x > top8 ? x : top8;
      }
      float top = sj[0];
      for (int64_t l = 0; l < 8 && l < body; ++l) top = std::max(top, top8[l]);
      for (int64_t t = body; t < span; ++t) top = std::max(top, sj[t]);
      v8f sum8 = {};
      for (int64_t t = 0; t < body; t += 8) {
        const v8f e = exp8_nonpositive(load8(sj + t) - top);
        store8(sj + t, e);
        sum8 += e;
      }
      float total = 0.0f;
      for (int64_t l = 0; l < 8; ++l) total += sum8[l];
      for (int64_t t = body; t < span; ++t) total += sj[t] = exp_nonpositive(sj[t] - top);
      const float inv = 1.0f / total;
      // Weighted sum of the values, head elements in registers.
      v8f acc[blocks] = {};
      for (int64_t t = 0; t < span; ++t) {
        const float w = sj[t] * inv;
        const float* vt = values + t * HS;
        for (int64_t b = 0; b < blocks; ++b) acc[b] += w * load8(vt + 8 * b);
      }
      for (int64_t b = 0; b < blocks; ++b) store8(out + j * HS + 8 * b, acc[b]);
    }
  }

  using v8f = float __attribute__((vector_size(32)));
  using v8i = int32_t __attribute__((vector_size(32)));

  static inline v8f load8(const float* p) {
    v8f v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }

  static inline void store8(float* p, v8f v) {
    std::memcpy(p, &v, sizeof(v));
  }

  // exp_nonpositive on eight lanes.
  static inline v8f exp8_nonpositive(v8f x) {
    const v8f floor_x = x * 0.0f - 87.0f;
    x = x < floor_x ? floor_x : x;
    const v8f y = x * 1.44269504088896341f + 0.5f;
    v8i ni = __builtin_convertvector(y, v8i);      // toward zero
    ni += (__builtin_convertvector(ni, v8f) > y);  // -1 where that rounded up: floor
    const v8f n = __builtin_convertvector(ni, v8f);
    const v8f r = x - n * 0.693359375f + n * 2.12194440e-4f;
    v8f p = r * 1.9875691500e-4f + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const v8i bits = (ni + 127) << 23;
    v8f two_n;
    std::memcpy(&two_n, &bits, sizeof(two_n));
    return p * two_n;
  }

  static void attend_scalar(int64_t hs, const float* __restrict__ q, int64_t g,
                            const float* __restrict__ keys_t, int64_t ctx,
                            const float* __restrict__ values, int64_t span, float scale,
                            float* __restrict__ scores, float* __restrict__ out) {
    for (int64_t j = 0; j < g; ++j) {
      // Scores in blocks of eight positions (a block of keys is hs runs of eight) kept in
      // registers across the head elements. The last block may hold positions past `span`:
      // those scores are ignored. Rows of `scores` are ctx (a multiple of 8) apart.
      float* sj = scores + j * ctx;
      const float* qj = q + j * hs;
      for (int64_t t0 = 0; t0 < span; t0 += 8) {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        const float* block = keys_t + t0 * hs;
        for (int64_t e = 0; e < hs; ++e) {
          const float qe = qj[e] * scale;
          for (int64_t l = 0; l < 8; ++l) acc[l] += qe * block[e * 8 + l];
        }
        for (int64_t l = 0; l < 8; ++l) sj[t0 + l] = acc[l];
      }
      // Reductions in eight independent lanes, so that they vectorize without -ffast-math.
      constexpr int64_t lanes = 8;
      float top_lane[lanes], sum_lane[lanes];
      for (int64_t l = 0; l < lanes; ++l) top_lane[l] = sj[0], sum_lane[l] = 0.0f;
      const int64_t body = span - span % lanes;
      for (int64_t t = 0; t < body; t += lanes)
        for (int64_t l = 0; l < lanes; ++l) top_lane[l] = std::max(top_lane[l], sj[t + l]);
      float top = sj[0];
      for (int64_t l = 0; l < lanes; ++l) top = std::max(top, top_lane[l]);
      for (int64_t t = body; t < span; ++t) top = std::max(top, sj[t]);
      for (int64_t t = 0; t < span; ++t) sj[t] = exp_nonpositive(sj[t] - top);
      for (int64_t t = 0; t < body; t += lanes)
        for (int64_t l = 0; l < lanes; ++l) sum_lane[l] += sj[t + l];
      float total = 0.0f;
      for (int64_t l = 0; l < lanes; ++l) total += sum_lane[l];
      for (int64_t t = body; t < span; ++t) total += sj[t];
      const float inv = 1.0f / total;
      for (int64_t t = 0; t < span; ++t) sj[t] *= inv;
    }
    std::fill(out, out + g * hs, 0.0f);
    for (int64_t t = 0; t < span; ++t) {
      const float* vt = values + t * hs;
      for (int64_t j = 0; j < g; ++j) {
        const float w = scores[j * ctx + t];
        float* oj = out + j * hs;
        for (int64_t e = 0; e < hs; ++e) oj[e] += w * vt[e];
      }
    }
  }

  // exp(x) for x <= 0 in straight-line code that vectorizes (std::exp does not without
  // -ffast-math): Cephes' expf, range reduction by ln 2 and a degree-6 polynomial, within 2 ulp.
  static inline float exp_nonpositive(float x) {
    x = std::max(x, -87.0f);
    const float n = std::floor(x * 1.44269504088896341f + 0.5f);
    const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float two_n;
    std::memcpy(&two_n, &bits, sizeof(two_n));
    return p * two_n;
  }

  int64_t capacity_ = 0;
  int64_t rows_out_ = 0;
  std::vector<prefill_item> decode_as_prefill_;
  // Prompts reaching past this position attend through matrix products instead of the row loop,
  // whose cost grows with the square of the length; a few tokens (a decode step's one, a short
  // chunk) always take the row loop, whose cost is linear in the span for them.
  static constexpr int64_t rows_attention_limit = 256;
  static constexpr int32_t rows_attention_tokens = 16;

  static bool attends_by_rows(const prefill_item& it) {
    return it.start + it.count <= rows_attention_limit || it.count <= rows_attention_tokens;
  }
  llama_tensors weights_;  // the matrices moved into packed_ and classifier_
  struct packed_layer {
    packed_matrix wqkv, wo, w13, w2;
  };
  std::vector<packed_layer> packed_;
  packed_matrix classifier_;
  at::Tensor k_cache_, v_cache_;
  int64_t key_blocks_ = 0;  // blocks of eight positions per head in k_cache_
  at::Tensor ws_tokens_, ws_positions_, ws_cache_rows_, ws_x_, ws_xb_, ws_qkv_, ws_qk_, ws_att_,
      ws_h_, ws_hb_, ws_last_, ws_xf_, ws_xfn_, ws_logits_, ws_slots_;
};

}  // namespace

expected<std::unique_ptr<causal_lm>> make_llama_loops(const llama_weights& weights,
                                                      const runtime_options& options,
                                                      int32_t context) {
  try {
    std::unique_ptr<causal_lm> result = std::make_unique<llama_loops>(weights, options, context);
    return result;
  } catch (const std::exception& e) {
    return make_error(ec::model_failure, std::string{"cannot build the model: "} + e.what());
  }
}

}  // namespace conveyor::model
