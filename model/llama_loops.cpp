// The Llama network of the CPU in plain loops between libtorch's matrix products: RMSNorm,
// rotary embedding, grouped-query attention, SwiGLU, over a KV cache reserved once. For a small
// model on a CPU the dispatch of many small torch operations costs more than their arithmetic;
// the network of torch operations for any device is model/llama_ops.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "kernels/cache_attention.hpp"
#include "kernels/huge_pages.hpp"
#include "kernels/packed_matmul.hpp"
#include "kernels/parallel_grain.hpp"
#include "kernels/vector8.hpp"
#include "kernels/work_pool.hpp"
#include "model/causal_lm.hpp"
#include "model/forward_pass.hpp"
#include "model/llama_base.hpp"
#include "model/llama_layout.hpp"
#include "model/llama_matrices.hpp"

namespace conveyor::model {

namespace {

// The plain-loop network is written in the CPU kernels' terms.
using namespace kernels;
using namespace kernels::vec8;

class llama_loops final : public llama_base {
 public:
  llama_loops(const llama_source& source, llama_matrices matrices, const runtime_options& opt,
              int32_t context)
      : llama_base(source.shape(), source.synthetic(), source.end_ids(), opt, context,
                   implementation(opt, matrices)),
        matrices_(std::move(matrices)),
        bf16_cache_(kv_dtype_of(opt) == compute_dtype::bf16) {
    c10::InferenceMode guard;
    const auto& s = shape_;
    std::tie(cos_, sin_) = rotary_tables(s, context);
    const int64_t d = s.dim, h = s.hidden_dim, q = s.q_dim(), kv = s.kv_dim(), v = s.vocab_size;
    const int64_t hs = s.head_size();

    // The KV cache per layer, in blocks of block_size_ positions that sequences share through
    // their block tables. Keys in runs of eight positions, each transposed:
    // [block, kv_head, offset / 8, head element, offset % 8], so that the scores of a query over
    // eight positions are eight lanes of one register, summed over the head's elements from one
    // contiguous run of the cache. Values as [block, kv_head, offset, head element], so that the
    // weighted sum is contiguous. Both in float32, or in bfloat16 (rounded to nearest even when
    // written, widened to float32 in registers when read): half the bytes attention reads.
    const auto cache_type = at::TensorOptions().dtype(bf16_cache_ ? at::kBFloat16 : at::kFloat);
    const int64_t cache_rows = int64_t{kv_blocks_} * s.n_kv_heads * block_size_;
    const std::vector<int64_t> k_shape{s.n_layers, cache_rows * hs};
    const std::vector<int64_t> v_shape{s.n_layers, cache_rows, hs};
    // In huge pages too: a step's attention streams through the cache (5 % off the s15m step at
    // batch 64, docs/benchmarks.md).
    const size_t element = bf16_cache_ ? 2 : 4;
    const size_t k_bytes = size_t(k_shape[0] * k_shape[1]) * element;
    const size_t v_bytes = size_t(v_shape[0] * v_shape[1] * v_shape[2]) * element;
    cache_arena_ = std::make_unique<huge_page_arena>(huge_page_arena::rounded(k_bytes) +
                                                     huge_page_arena::rounded(v_bytes));
    // Zero as the arena starts, and resident only as sequences write it: a cache sized for the
    // whole context takes memory as the contexts grow.
    auto zeros_in_arena = [&](const std::vector<int64_t>& shape, size_t bytes) {
      return at::from_blob(cache_arena_->take(bytes), shape, cache_type);
    };
    k_cache_ = zeros_in_arena(k_shape, k_bytes);
    v_cache_ = zeros_in_arena(v_shape, v_bytes);

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
    ws_tables_.assign(size_t(n), nullptr);  // the block table of each row
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
      decode_as_prefill_.push_back({it.blocks, it.position, &it.token, 1, -1});
    return prefill(decode_as_prefill_);
  }

  // The bytes reserved, in the cache's own format whatever the weights'.
  int64_t kv_cache_bytes() const override {
    return int64_t(k_cache_.nbytes() + v_cache_.nbytes());
  }

  void copy_block(int32_t from, int32_t to) override {
    c10::InferenceMode guard;
    for (auto* cache : {&k_cache_, &v_cache_}) {
      auto blocks = cache->view({shape_.n_layers, kv_blocks_, -1});
      blocks.select(1, to).copy_(blocks.select(1, from));
    }
  }

 private:
  // The network's name in describe(): which numbers are bf16.
  static std::string implementation(const runtime_options& opt, const llama_matrices& m) {
    const bool weights = opt.dtype == compute_dtype::bf16;
    const bool cache = kv_dtype_of(opt) == compute_dtype::bf16;
    const auto quantized = m.quantized_types();
    if (!quantized.empty()) {
      std::string types;
      for (const auto& t : quantized) types += (types.empty() ? "" : " and ") + t;
      return "plain loops, " + types + " weights with 8-bit product inputs (" +
             quant_isa_name(quantized_matrix::isa()) + "), " + (cache ? "bf16" : "f32") +
             " KV cache, f32 activations";
    }
    if (weights && opt.bf16_inputs)
      return std::string{"plain loops, bf16 weights and product inputs ("} +
             (packed_matrix::bf16_dot_instruction() ? "AVX-512 BF16" : "vector code") + "), " +
             (cache ? "bf16" : "f32") + " KV cache, f32 sums and activations";
    if (weights && cache) return "plain loops, bf16 weights and KV cache, f32 activations";
    if (weights) return "plain loops, bf16 weights, f32 activations and KV cache";
    if (cache) return "plain loops, bf16 KV cache, f32 weights and activations";
    return "plain loops";
  }

  void prefill_pass(const std::vector<prefill_item>& items, const forward_pass& pass) {
    const int64_t n = pass.tokens;
    const int64_t outputs = lay_out_rows(
        items, pass, shape_.n_kv_heads, block_size_,
        {ws_tokens_.data_ptr<int64_t>(), ws_positions_.data_ptr<int64_t>(),
         ws_cache_rows_.data_ptr<int64_t>(), ws_last_.data_ptr<int64_t>(), ws_tables_.data()});
    // Every row, of a prompt or of a decode step, attends through the one row loop: a row's
    // arithmetic is then the same however its prompt was split into passes, whatever else the
    // pass holds and whichever blocks hold its cache (a prompt whose beginning came from the
    // prefix cache gives the very bits of one computed whole).
    forward(n, [&](int32_t layer, const at::Tensor& q, at::Tensor& out) {
      rows_attention(layer, n, q, out);
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
      const auto& lw = matrices_.layers[size_t(l)];
      rmsnorm(xb, x, n, lw.wqkv, lw.rms_att);
      multiply(lw.wqkv, xb, qkv, n, lw.bqkv.empty() ? nullptr : lw.bqkv.data());
      // Queries and keys share the rotary tables: one pass over both, into qk = [q | k].
      rope(qk, qkv, n, sh.n_heads + sh.n_kv_heads);
      write_cache(l, n, qk.narrow(1, q, kv), qkv.narrow(1, q + kv, kv));
      attention(l, qk.narrow(1, 0, q), att);
      multiply(lw.wo, att, x, n, nullptr, true);
      rmsnorm(xb, x, n, lw.w13, lw.rms_ffn);
      multiply(lw.w13, xb, hbuf, n);
      swiglu(hb, hbuf, n, h);
      multiply(lw.w2, hb, x, n, nullptr, true);
    }
  }

  // The first n rows of out = in W (+ bias), or out += in W with `accumulate`.
  static void multiply(const weight_product& w, const at::Tensor& in, at::Tensor& out, int64_t n,
                       const float* bias = nullptr, bool accumulate = false) {
    w.multiply(in.data_ptr<float>(), in.stride(0), n, out.data_ptr<float>(), out.stride(0), bias,
               accumulate);
  }

  // Rows of the token embedding into x.
  void embed(at::Tensor& x, int64_t n) {
    const int64_t d = shape_.dim;
    const auto* tok = ws_tokens_.data_ptr<int64_t>();
    float* out = x.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) matrices_.embedding.row(tok[i], out + i * d);
  }

  // Runs f(begin, end) over [0, n) rows, in parallel when each row has `row_cost` work.
  template <class F>
  static void over_rows(int64_t n, int64_t row_cost, F&& f) {
    const int64_t grain = grain_for(row_cost);
    parallel_for(n, grain, f);
  }

  // out = in / rms(in), row by row (rows of `in` contiguous), times the norm's `weight` unless
  // the product `next` has it folded into its numbers.
  void rmsnorm(at::Tensor& out, const at::Tensor& in, int64_t n, const weight_product& next,
               const std::vector<float>& weight) {
    const int64_t d = in.size(1);
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const float eps = shape_.rms_norm_eps;
    const float* w = next.folded() ? nullptr : weight.data();
    over_rows(n, d, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* x = src + i * d;
        float ss = 0.0f;
        for (int64_t e = 0; e < d; ++e) ss += x[e] * x[e];
        const float inv = 1.0f / std::sqrt(ss / float(d) + eps);
        float* y = dst + i * d;
        if (w != nullptr)
          for (int64_t e = 0; e < d; ++e) y[e] = x[e] * inv * w[e];
        else
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
    const float* cos_table = cos_.data_ptr<float>();
    const float* sin_table = sin_.data_ptr<float>();
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
    rmsnorm(xfn, ws_xf_, m, matrices_.classifier, matrices_.rms_final);
    auto out = ws_logits_.narrow(0, offset, m);
    multiply(matrices_.classifier, xfn, out, m);
  }

  // Copies this pass's keys and values (rows of [n, kv_dim], possibly strided) into the cache
  // rows of (block, kv_head, offset) listed in ws_cache_rows_, rounded to bf16 in a bf16 cache.
  void write_cache(int32_t layer, int64_t n, const at::Tensor& k, const at::Tensor& v) {
    if (bf16_cache_)
      write_cache_as<uint16_t>(layer, n, k, v);
    else
      write_cache_as<float>(layer, n, k, v);
  }

  // The cache of `layer` as T (float, or uint16_t for the bits of bf16).
  template <class T>
  static T* cache_of(const at::Tensor& cache, int32_t layer) {
    return static_cast<T*>(cache[layer].data_ptr());
  }

  template <class T>
  void write_cache_as(int32_t layer, int64_t n, const at::Tensor& k, const at::Tensor& v) {
    const int64_t hs = shape_.head_size(), kvh = shape_.n_kv_heads, bs = block_size_;
    const auto* rows = ws_cache_rows_.data_ptr<int64_t>();
    T* kc = cache_of<T>(k_cache_, layer);
    T* vc = cache_of<T>(v_cache_, layer);
    const float* kp = k.data_ptr<float>();
    const float* vp = v.data_ptr<float>();
    const int64_t ks = k.stride(0), vs = v.stride(0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < kvh; ++h) {
        // rows[] = (block * kvh + h) * bs + offset: the keys of a (block, kv head) are bs * hs
        // numbers from (row - offset) * hs, in runs of eight positions.
        const int64_t row = rows[i * kvh + h], offset = row % bs;
        T* block = kc + (row - offset) * hs + (offset / 8) * hs * 8 + offset % 8;
        const float* key = kp + i * ks + h * hs;
        for (int64_t e = 0; e < hs; ++e) store_cached(block + e * 8, key[e]);
        T* value = vc + row * hs;
        const float* vrow = vp + i * vs + h * hs;
        for (int64_t e = 0; e < hs; ++e) store_cached(value + e, vrow[e]);
      }
  }

  // Attention of each row (one token of a sequence) over its sequence's blocks, positions
  // 0..position. A plain loop: it reads the cache in place (no gather, no mask) and replaces
  // seven torch operations per layer, whose dispatch cost dominated a step of a small model.
  // Causal by construction: a row reads only positions up to its own, and the whole pass's keys
  // are in the cache before any row attends.
  void rows_attention(int32_t layer, int64_t n, const at::Tensor& q, at::Tensor& out) {
    if (bf16_cache_)
      rows_attention_as<uint16_t>(layer, n, q, out);
    else
      rows_attention_as<float>(layer, n, q, out);
  }

  // A (row, kv head) task of attention costs about this many multiply-adds of a packed product
  // per position and query head element: each number of the cache it reads is used once, where a
  // product uses a weight for every row, and each position's score takes an exp. Chosen by
  // measurement (docs/benchmarks.md): 8 to 32 give alike steps; 1, the multiply-adds
  // alone, kept attention on one thread where it was most of the step.
  static constexpr int64_t attention_cost = 16;

  template <class T>
  void rows_attention_as(int32_t layer, int64_t n, const at::Tensor& q, at::Tensor& out) {
    const int64_t hs = shape_.head_size(), kvh = shape_.n_kv_heads, heads = shape_.n_heads;
    const int64_t g = heads / kvh;
    const T* kc = cache_of<T>(k_cache_, layer);
    const T* vc = cache_of<T>(v_cache_, layer);
    const float* qp = q.data_ptr<float>();
    const int64_t q_stride = q.stride(0);
    float* op = out.data_ptr<float>();
    const auto* pos = ws_positions_.data_ptr<int64_t>();
    const int32_t* const* tables = ws_tables_.data();
    const float scale = 1.0f / std::sqrt(float(hs));
    const int64_t bs = block_size_, block_stride = kvh * bs * hs;
    const int64_t ctx = table_blocks_ * bs;  // the most positions a row reads; scores' stride
    int64_t longest = 1;
    for (int64_t i = 0; i < n; ++i) longest = std::max(longest, pos[i] + 1);
    const int64_t grain = grain_for(attention_cost * longest * hs * g);
    // One task per (row, kv head): the g query heads that share a kv head read its keys and
    // values once.
    parallel_for(n * kvh, grain, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> scores;
      if (int64_t(scores.size()) < ctx * g + 8) scores.resize(size_t(ctx * g + 8));
      for (int64_t r = begin; r < end; ++r) {
        const int64_t i = r / kvh, kh = r % kvh;
        const cache_blocks<T> cache{kc + kh * bs * hs, vc + kh * bs * hs, block_stride, tables[i],
                                    bs};
        attend_cached(hs, qp + i * q_stride + kh * g * hs, g, cache, ctx, pos[i] + 1, scale,
                      scores.data(), op + (i * heads + kh * g) * hs);
      }
    });
  }

  int64_t capacity_ = 0;
  int64_t rows_out_ = 0;
  std::vector<prefill_item> decode_as_prefill_;
  llama_matrices matrices_;
  at::Tensor cos_, sin_;                          // the rotary tables (llama_layout.hpp)
  std::unique_ptr<huge_page_arena> cache_arena_;  // where k_cache_ and v_cache_ are
  bool bf16_cache_;          // k_cache_ and v_cache_ hold bf16 (else float32)
  at::Tensor k_cache_, v_cache_;
  at::Tensor ws_tokens_, ws_positions_, ws_cache_rows_, ws_x_, ws_xb_, ws_qkv_, ws_qk_, ws_att_,
      ws_h_, ws_hb_, ws_last_, ws_xf_, ws_xfn_, ws_logits_;
  std::vector<const int32_t*> ws_tables_;
};

}  // namespace

expected<std::unique_ptr<causal_lm>> make_llama_loops(const llama_source& source,
                                                      const runtime_options& options,
                                                      int32_t context) {
  try {
    c10::InferenceMode guard;
    matrix_options mo;
    mo.format = options.dtype != compute_dtype::bf16 ? weight_format::f32
                : options.bf16_inputs                ? weight_format::bf16_dot
                                                     : weight_format::bf16;
    if (options.quantize == "q8_0") mo.quantize = quant_type::q8_0;
    if (options.quantize == "q4_0") mo.quantize = quant_type::q4_0;
    if (!options.quantize.empty() && !mo.quantize)
      return make_error(ec::bad_config, "cannot quantize weights to '" + options.quantize +
                                            "' (the load-time types are q8_0 and q4_0)");
    auto matrices = build_llama_matrices(source, mo);
    if (!matrices) return matrices.error();
    std::unique_ptr<causal_lm> result =
        std::make_unique<llama_loops>(source, std::move(*matrices), options, context);
    return result;
  } catch (const std::exception& e) {
    return make_error(ec::model_failure, std::string{"cannot build the model: "} + e.what());
  }
}

}  // namespace conveyor::model
