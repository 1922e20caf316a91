// The Llama network in torch operations, for any device: "cpu" and "cuda:N" run the same code.
// Weights, KV cache and workspace live on the device, reserved once; the per-step inputs are
// laid out in host buffers (pinned on a GPU) and copied over without blocking; logits come back
// to the host. Attention is torch's fused scaled-dot-product attention where libtorch has it
// (2.x) and matrix products with a softmax in between on older versions (Debian's 1.13). What
// exists on CUDA alone (pinned memory, waiting for the device, CUDA graphs of the decode step)
// is in device_support.cpp.
#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/version.h>

#include "model/causal_lm.hpp"
#include "model/llama_base.hpp"
#include "model/device_support.hpp"
#include "model/forward_pass.hpp"
#include "model/graph_buckets.hpp"
#include "model/llama_layout.hpp"

#if TORCH_VERSION_MAJOR >= 2
#define CONVEYOR_FUSED_ATTENTION 1
#endif

namespace conveyor::model {

namespace {

class llama_ops final : public llama_base {
 public:
  llama_ops(const llama_weights& w, const runtime_options& opt, int32_t context)
      : llama_base(w.shape, w.synthetic, w.end_ids, opt, context,
                   opt.cuda_graphs && parse_device(opt.device).is_cuda() && cuda_graphs_built()
                       ? "torch operations, CUDA graphs"
                       : "torch operations"),
        device_(parse_device(opt.device)),
        type_(opt.dtype == compute_dtype::bf16 ? at::kBFloat16 : at::kFloat),
        weights_(lay_out_llama(w, context)),
        graphs_(device_, opt.cuda_graphs),
        buckets_(slots_) {
    c10::InferenceMode guard;
    const auto& s = shape_;
    const int64_t d = s.dim, h = s.hidden_dim, q = s.q_dim(), kv = s.kv_dim(), v = s.vocab_size;
    const int64_t hs = s.head_size();
    const auto on_device = at::TensorOptions().device(device_);
    const auto floats = on_device.dtype(type_), longs = on_device.dtype(at::kLong);
    auto place = [&](at::Tensor& t) { t = t.to(device_, type_); };
    for (auto* t : {&weights_.embedding, &weights_.wcls_t, &weights_.cos, &weights_.sin}) place(*t);
    for (auto& lw : weights_.layers)
      for (auto* t : {&lw.wqkv_t, &lw.bqkv, &lw.wo_t, &lw.w13_t, &lw.w2_t})
        if (t->defined()) place(*t);

    // The KV cache, [layer][block, kv head, offset, head element]: blocks of block_size_
    // positions that sequences share through their block tables.
    k_cache_ = at::zeros({s.n_layers, kv_blocks_, s.n_kv_heads, block_size_, hs}, floats);
    v_cache_ = at::zeros_like(k_cache_);

    // Workspace for one forward pass of up to `capacity_` tokens, reused by every step.
    capacity_ = std::max({opt.max_batched_tokens, slots_, context_});
    const int64_t n = capacity_;
    ws_tokens_ = at::empty({n}, longs);
    ws_positions_ = at::empty({n}, longs);
    ws_cache_rows_ = at::empty({n * s.n_kv_heads}, longs);
    ws_last_ = at::empty({n}, longs);
    // The block tables of a decode step's rows, each table_blocks_ long (a fixed shape for the
    // captured graphs; entries past a sequence's blocks repeat its first and are masked).
    ws_tables_ = at::empty({int64_t{slots_} * table_blocks_}, longs);
    ws_x_ = at::empty({n, d}, floats);
    ws_xb_ = at::empty({n, d}, floats);
    ws_sq_ = at::empty({n, d}, floats);
    ws_ms_ = at::empty({n, 1}, floats);
    ws_qkv_ = at::empty({n, q + 2 * kv}, floats);
    ws_q_ = at::empty({n, q}, floats);
    ws_k_ = at::empty({n, kv}, floats);
    ws_cos_ = at::empty({n, hs / 2}, floats);
    ws_sin_ = at::empty({n, hs / 2}, floats);
    ws_att_ = at::empty({n, q}, floats);
    ws_h_ = at::empty({n, 2 * h}, floats);
    ws_hb_ = at::empty({n, h}, floats);
    ws_xf_ = at::empty({n, d}, floats);
    ws_xfn_ = at::empty({n, d}, floats);
    ws_msf_ = at::empty({n, 1}, floats);
    ws_logits_ = at::empty({n, v}, floats);
    // Decode attention: the blocks of the step's rows gathered, the keys and values laid out
    // [row, kv head, position, element], and the mask of each row.
    const int64_t span = table_span();
    ws_blocks_ = at::empty({int64_t{slots_} * span * s.n_kv_heads * hs}, floats);
    ws_kg_ = at::empty({int64_t{slots_} * s.n_kv_heads * span * hs}, floats);
    ws_vg_ = at::empty_like(ws_kg_);
#if !defined(CONVEYOR_FUSED_ATTENTION)
    ws_scores_ = at::empty({int64_t{slots_} * s.n_heads * span}, floats);
    ws_probs_ = at::empty_like(ws_scores_);
#endif
    ws_mask_ = at::empty({int64_t{slots_} * span}, floats);
    // Host side of the per-step inputs (int64) and of the mask and logits (float32): the
    // workspace itself where it is host memory of that type, else staging buffers (pinned on a
    // GPU) that upload() and download() copy.
    auto host = [&](const at::Tensor& t, at::ScalarType type) {
      if (device_.is_cpu() && t.scalar_type() == type) return t;
      return host_staging_like(t, type, device_);
    };
    h_tokens_ = host(ws_tokens_, at::kLong);
    h_positions_ = host(ws_positions_, at::kLong);
    h_cache_rows_ = host(ws_cache_rows_, at::kLong);
    h_last_ = host(ws_last_, at::kLong);
    h_tables_ = host(ws_tables_, at::kLong);
    h_mask_ = host(ws_mask_, at::kFloat);
    h_logits_ = host(ws_logits_, at::kFloat);
    synchronize(device_);
  }

  logits_view prefill(const std::vector<prefill_item>& items) override {
    c10::InferenceMode guard;
    // Each item fits in a pass alone since capacity_ >= context_.
    rows_out_ = 0;
    // Every position of long prompts may outgrow the workspace's rows: a buffer of their own then
    // (ws_logits_ stays where the captured decode graphs write).
    const int64_t rows = logits_rows(items);
    logits_ = &ws_logits_;
    h_out_ = &h_logits_;
    if (rows > ws_logits_.size(0)) {
      if (!wide_logits_.defined() || wide_logits_.size(0) < rows) {
        wide_logits_ = at::empty({rows, int64_t{shape_.vocab_size}}, ws_logits_.options());
        // As h_logits_: the tensor itself when it is float32 host memory, else a staging copy.
        h_wide_logits_ = device_.is_cpu() && wide_logits_.scalar_type() == at::kFloat
                             ? wide_logits_
                             : host_staging_like(wide_logits_, at::kFloat, device_);
      }
      logits_ = &wide_logits_;
      h_out_ = &h_wide_logits_;
    }
    for_each_pass(items, capacity_, [&](const forward_pass& pass) { prefill_pass(items, pass); });
    auto view = download(rows, *logits_, *h_out_);
    logits_ = &ws_logits_;
    h_out_ = &h_logits_;
    return view;
  }

  void copy_block(int32_t from, int32_t to) override {
    c10::InferenceMode guard;
    // [layer, block, kv head, offset, element]: every layer at once, on the device.
    k_cache_.select(1, to).copy_(k_cache_.select(1, from));
    v_cache_.select(1, to).copy_(v_cache_.select(1, from));
  }

  logits_view decode(const std::vector<decode_item>& items) override {
    c10::InferenceMode guard;
    const int64_t n = static_cast<int64_t>(items.size());
    if (n == 0) return {h_logits_.data_ptr<float>(), 0, shape_.vocab_size};
    // With graphs a batch of n runs as its bucket b >= n, its extra rows repeating item 0 (they
    // write the same key and value to the same cache row again; their logits are ignored), and
    // attention reads every row's whole block table under the mask: fixed shapes for every
    // replay. Without graphs, the blocks that the longest row reaches.
    const int64_t rows = graphs_.active() ? buckets_.bucket_of(n) : n;
    const int64_t bs = block_size_;
    int64_t blocks = table_blocks_;
    if (!graphs_.active()) {
      int64_t span = 0;
      for (const auto& it : items) span = std::max<int64_t>(span, it.position + 1);
      blocks = (span + bs - 1) / bs;
    }
    const int64_t span = blocks * bs;
    synchronize(device_);  // the previous step may still read the staging buffers
    auto* tok = h_tokens_.data_ptr<int64_t>();
    auto* pos = h_positions_.data_ptr<int64_t>();
    auto* last = h_last_.data_ptr<int64_t>();
    auto* tables = h_tables_.data_ptr<int64_t>();
    auto* rows_of_cache = h_cache_rows_.data_ptr<int64_t>();
    auto* mask = h_mask_.data_ptr<float>();
    const int64_t kvh = shape_.n_kv_heads;
    const float neg_inf = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < rows; ++i) {
      const auto& it = items[size_t(i < n ? i : 0)];
      tok[i] = it.token;
      pos[i] = it.position;
      last[i] = i;
      // The row's blocks; past those its position reaches, its first again (masked).
      const int64_t own = it.position / bs + 1;
      for (int64_t b = 0; b < blocks; ++b) tables[i * blocks + b] = it.blocks[b < own ? b : 0];
      const int64_t block = it.blocks[it.position / bs], offset = it.position % bs;
      for (int64_t kh = 0; kh < kvh; ++kh)
        rows_of_cache[i * kvh + kh] = (block * kvh + kh) * bs + offset;
      // Row i may read positions 0..position_i.
      for (int64_t j = 0; j < span; ++j) mask[i * span + j] = j <= it.position ? 0.0f : neg_inf;
    }
    upload(rows, rows, rows * span, rows * blocks);
    graphs_.run(rows, [&] {
      auto step_mask = ws_mask_.narrow(0, 0, rows * span).view({rows, span});
      forward(rows, [&](int32_t layer, const at::Tensor& q, at::Tensor& out) {
        decode_attention(layer, rows, blocks, q, step_mask, out);
      });
      final_logits(rows, 0);
    });
    return download(n, ws_logits_, h_logits_);
  }

 private:
  void prefill_pass(const std::vector<prefill_item>& items, const forward_pass& pass) {
    synchronize(device_);  // the previous pass may still read the staging buffers
    const int64_t outputs =
        lay_out_rows(items, pass, shape_.n_kv_heads, block_size_,
                     {h_tokens_.data_ptr<int64_t>(), h_positions_.data_ptr<int64_t>(),
                      h_cache_rows_.data_ptr<int64_t>(), h_last_.data_ptr<int64_t>(), nullptr});
    upload(pass.tokens, outputs, 0, 0);
    // The block tables of the pass's items, as one tensor on the device.
    int64_t total = 0;
    for (size_t i = pass.first; i < pass.last; ++i) total += blocks_reached(items[i]);
    auto host_tables = at::empty({total}, at::kLong);
    auto* entry = host_tables.data_ptr<int64_t>();
    for (size_t i = pass.first; i < pass.last; ++i)
      for (int64_t b = 0; b < blocks_reached(items[i]); ++b) *entry++ = items[i].blocks[b];
    const auto tables = host_tables.to(device_);
    forward(pass.tokens, [&](int32_t layer, const at::Tensor& q, at::Tensor& out) {
      int64_t offset = 0, first_block = 0;
      for (size_t i = pass.first; i < pass.last; ++i) {
        const int64_t blocks = blocks_reached(items[i]);
        prefill_attention(layer, items[i], offset, tables.narrow(0, first_block, blocks), q, out);
        offset += items[i].count;
        first_block += blocks;
      }
    });
    final_logits(outputs, rows_out_);
    rows_out_ += outputs;
  }

  // out = in / rms(in) (the norm's weight is folded into the next matrix); scratch sized like in.
  void rmsnorm(at::Tensor& out, const at::Tensor& in, at::Tensor& sq, at::Tensor& ms) const {
    at::mul_out(sq, in, in);
    at::mean_out(ms, sq, {1}, /*keepdim=*/true);
    ms.add_(shape_.rms_norm_eps).rsqrt_();
    at::mul_out(out, in, ms);
  }

  // Rotary embedding of [n, heads*hs] (rows may be strided) into dst [n, heads*hs]: the pairs
  // (2j, 2j+1) of each head turn by the angles of ws_cos_/ws_sin_.
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
    const int64_t qd = sh.q_dim(), kv = sh.kv_dim(), h = sh.hidden_dim, hs = sh.head_size();
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
    at::index_select_out(x, weights_.embedding, 0, tokens);
    at::index_select_out(cs, weights_.cos, 0, positions);
    at::index_select_out(sn, weights_.sin, 0, positions);
    for (int32_t l = 0; l < sh.n_layers; ++l) {
      const auto& lw = weights_.layers[l];
      rmsnorm(xb, x, sq, ms);
      if (lw.bqkv.defined())
        at::addmm_out(qkv, lw.bqkv, xb, lw.wqkv_t);
      else
        at::mm_out(qkv, xb, lw.wqkv_t);
      rope(q, qkv.narrow(1, 0, qd), n, sh.n_heads);
      rope(k, qkv.narrow(1, qd, kv), n, sh.n_kv_heads);
      // This pass's keys and values into the cache rows of (block, kv head, offset).
      const auto cache_rows = int64_t{kv_blocks_} * sh.n_kv_heads * block_size_;
      k_cache_[l].view({cache_rows, hs}).index_copy_(0, rows, k.reshape({n * sh.n_kv_heads, hs}));
      v_cache_[l].view({cache_rows, hs})
          .index_copy_(0, rows, qkv.narrow(1, qd + kv, kv).reshape({n * sh.n_kv_heads, hs}));
      attention(l, q, att);
      x.addmm_(att, lw.wo_t);
      rmsnorm(xb, x, sq, ms);
      at::mm_out(hbuf, xb, lw.w13_t);
      at::silu_out(hb, hbuf.narrow(1, 0, h));
      hb.mul_(hbuf.narrow(1, h, h));
      x.addmm_(hb, lw.w2_t);
    }
  }

  // Logits of the rows listed in ws_last_[0..m) into *logits_[offset..offset+m) (ws_logits_
  // unless a prefill needs more rows).
  void final_logits(int64_t m, int64_t offset) {
    auto xf = ws_xf_.narrow(0, 0, m);
    auto xfn = ws_xfn_.narrow(0, 0, m);
    auto sq = ws_sq_.narrow(0, 0, m);
    auto ms = ws_msf_.narrow(0, 0, m);
    at::index_select_out(xf, ws_x_, 0, ws_last_.narrow(0, 0, m));
    rmsnorm(xfn, xf, sq, ms);
    auto out = logits_->narrow(0, offset, m);
    at::mm_out(out, xfn, weights_.wcls_t);
  }

  // The keys or values of positions 0..span-1 of a sequence (`cache` of one layer), gathered
  // from the blocks of `table` (on the device): [kvh, span, hs].
  at::Tensor sequence_cache(const at::Tensor& cache, const at::Tensor& table, int64_t span) const {
    const int64_t blocks = table.size(0), kvh = shape_.n_kv_heads, hs = shape_.head_size();
    return at::index_select(cache, 0, table)  // [blocks, kvh, bs, hs]
        .permute({1, 0, 2, 3})
        .reshape({kvh, blocks * block_size_, hs})
        .narrow(1, 0, span);
  }

  // The blocks an item's positions reach.
  int64_t blocks_reached(const prefill_item& it) const {
    return (int64_t{it.start} + it.count + block_size_ - 1) / block_size_;
  }

  // The positions of a full block table: what a decode step's attention reads under graphs.
  int64_t table_span() const {
    return int64_t{table_blocks_} * block_size_;
  }

  // Causal attention of one prompt's t tokens (positions start..start+t-1) over its blocks
  // (`table`, on the device).
  void prefill_attention(int32_t layer, const prefill_item& it, int64_t offset,
                         const at::Tensor& table, const at::Tensor& q, at::Tensor& out) {
    const auto& sh = shape_;
    const int64_t t = it.count, hs = sh.head_size(), kvh = sh.n_kv_heads, heads = sh.n_heads;
    const int64_t g = heads / kvh, span = it.start + t;
    auto keys = sequence_cache(k_cache_[layer], table, span);  // [kvh, span, hs]
    auto values = sequence_cache(v_cache_[layer], table, span);
    // Query i (position start+i) reads positions 0..start+i.
    auto allowed = at::ones({t, span}, at::TensorOptions().dtype(at::kBool).device(device_))
                       .tril_(it.start);
    auto rows = out.narrow(0, offset, t).view({t, heads, hs});
#if defined(CONVEYOR_FUSED_ATTENTION)
    auto qi = q.narrow(0, offset, t).view({t, heads, hs}).transpose(0, 1).unsqueeze(0);
    auto o = at::scaled_dot_product_attention(qi, keys.unsqueeze(0), values.unsqueeze(0), allowed,
                                              0.0, false, std::nullopt, /*enable_gqa=*/g > 1);
    rows.copy_(o[0].transpose(0, 1));  // [heads, t, hs] -> [t, heads, hs]
#else
    // Queries [t, kvh, g, hs] -> [kvh, g*t, hs]: the g heads of a kv head share its keys.
    auto qi = q.narrow(0, offset, t)
                  .view({t, kvh, g, hs})
                  .permute({1, 2, 0, 3})
                  .reshape({kvh, g * t, hs});
    auto scores = at::bmm(qi, keys.transpose(1, 2)).mul_(1.0 / std::sqrt(double(hs)));
    scores.view({kvh, g, t, span}).masked_fill_(allowed.logical_not(),
                                                -std::numeric_limits<float>::infinity());
    auto o = at::bmm(at::_softmax(scores, -1, false), values);  // [kvh, g*t, hs]
    rows.view({t, kvh, g, hs}).copy_(o.view({kvh, g, t, hs}).permute({2, 0, 1, 3}));
#endif
  }

  // Attention of one token per row over the first `blocks` blocks of its block table
  // (positions 0..span-1 under `mask`, 0 or -inf per row and position).
  void decode_attention(int32_t layer, int64_t n, int64_t blocks, const at::Tensor& q,
                        const at::Tensor& mask, at::Tensor& out) {
    const auto& sh = shape_;
    const int64_t hs = sh.head_size(), kvh = sh.n_kv_heads, heads = sh.n_heads, g = heads / kvh;
    const int64_t bs = block_size_, span = blocks * bs;
    auto tables = ws_tables_.narrow(0, 0, n * blocks);
    auto kg = ws_kg_.narrow(0, 0, n * kvh * span * hs).view({n, kvh, span, hs});
    auto vg = ws_vg_.narrow(0, 0, n * kvh * span * hs).view({n, kvh, span, hs});
    // Each row's blocks gathered [n, blocks, kvh, bs, hs], then laid out [n, kvh, position, hs].
    auto gathered =
        ws_blocks_.narrow(0, 0, n * blocks * kvh * bs * hs).view({n * blocks, kvh, bs, hs});
    for (auto [cache, dst] :
         {std::pair<const at::Tensor*, at::Tensor*>{&k_cache_, &kg}, {&v_cache_, &vg}}) {
      at::index_select_out(gathered, (*cache)[layer], 0, tables);
      dst->view({n, kvh, blocks, bs, hs})
          .copy_(gathered.view({n, blocks, kvh, bs, hs}).permute({0, 2, 1, 3, 4}));
    }
#if defined(CONVEYOR_FUSED_ATTENTION)
    auto o = at::scaled_dot_product_attention(q.view({n, heads, 1, hs}), kg, vg,
                                              mask.view({n, 1, 1, span}), 0.0, false,
                                              std::nullopt, /*enable_gqa=*/g > 1);
    out.view({n, heads, hs}).copy_(o.view({n, heads, hs}));
#else
    auto scores = ws_scores_.narrow(0, 0, n * kvh * g * span).view({n * kvh, g, span});
    auto probs = ws_probs_.narrow(0, 0, n * kvh * g * span).view({n * kvh, g, span});
    at::bmm_out(scores, q.view({n * kvh, g, hs}), kg.view({n * kvh, span, hs}).transpose(1, 2));
    scores.mul_(1.0 / std::sqrt(double(hs)));
    scores.view({n, kvh * g, span}).add_(mask.view({n, 1, span}));
    at::_softmax_out(probs, scores, -1, false);
    auto att = out.view({n * kvh, g, hs});
    at::bmm_out(att, probs, vg.view({n * kvh, span, hs}));
#endif
  }

  /// Copies the first `rows` tokens and positions (and their cache rows), `outputs` logit rows,
  /// `mask` mask elements and `tables` block-table entries from the host buffers to the
  /// workspace (nothing to do where they are the same memory).
  void upload(int64_t rows, int64_t outputs, int64_t mask, int64_t tables) {
    auto copy = [](at::Tensor& dst, const at::Tensor& src, int64_t count) {
      if (count > 0 && !dst.is_same(src))
        dst.narrow(0, 0, count).copy_(src.narrow(0, 0, count), /*non_blocking=*/true);
    };
    copy(ws_tokens_, h_tokens_, rows);
    copy(ws_positions_, h_positions_, rows);
    copy(ws_cache_rows_, h_cache_rows_, rows * shape_.n_kv_heads);
    copy(ws_last_, h_last_, outputs);
    copy(ws_tables_, h_tables_, tables);
    copy(ws_mask_, h_mask_, mask);
  }

  /// The first `rows` rows of logits, readable on the host (a blocking copy from a GPU).
  logits_view download(int64_t rows, const at::Tensor& logits, at::Tensor& host) {
    if (!host.is_same(logits)) host.narrow(0, 0, rows).copy_(logits.narrow(0, 0, rows));
    return {host.data_ptr<float>(), static_cast<int32_t>(rows), shape_.vocab_size};
  }

  c10::Device device_;
  at::ScalarType type_;
  llama_tensors weights_;
  step_graphs graphs_;
  graph_bucket_table buckets_;
  int64_t capacity_ = 0;
  int64_t rows_out_ = 0;
  at::Tensor k_cache_, v_cache_;
  at::Tensor ws_tokens_, ws_positions_, ws_cache_rows_, ws_last_, ws_tables_, ws_x_, ws_xb_, ws_sq_,
      ws_ms_, ws_qkv_, ws_q_, ws_k_, ws_cos_, ws_sin_, ws_att_, ws_h_, ws_hb_, ws_xf_, ws_xfn_,
      ws_msf_, ws_logits_, ws_blocks_, ws_kg_, ws_vg_, ws_scores_, ws_probs_, ws_mask_;
  at::Tensor h_tokens_, h_positions_, h_cache_rows_, h_last_, h_tables_, h_mask_, h_logits_;
  // Logits of a prefill with more rows than the workspace (every position of long prompts), on
  // the device and the host; and where final_logits writes and download reads now.
  at::Tensor wide_logits_, h_wide_logits_;
  at::Tensor* logits_ = &ws_logits_;
  at::Tensor* h_out_ = &h_logits_;
};

}  // namespace

expected<std::unique_ptr<causal_lm>> make_llama_ops(const llama_weights& weights,
                                                    const runtime_options& options,
                                                    int32_t context) {
  try {
    // The cache is a tensor of the network's compute type: no other format is kept.
    if (kv_dtype_of(options) != options.dtype)
      return make_error(ec::bad_config,
                        std::string{"model.kv_cache_dtype = "} + dtype_name(kv_dtype_of(options)) +
                            " needs the plain-loop network (the CPU's); the torch-operation "
                            "network keeps its KV cache in model.dtype (" +
                            dtype_name(options.dtype) + ")");
    if (auto why = device_unavailable(parse_device(options.device)); !why.empty())
      return make_error(ec::bad_config,
                        "device '" + options.device + "' is not available: " + why);
    std::unique_ptr<causal_lm> result = std::make_unique<llama_ops>(weights, options, context);
    return result;
  } catch (const std::exception& e) {
    return make_error(ec::model_failure, std::string{"cannot build the model on "} +
                                             options.device + ": " + e.what());
  }
}

}  // namespace conveyor::model
