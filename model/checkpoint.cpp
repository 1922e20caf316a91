#include "model/checkpoint.hpp"

#include <sys/stat.h>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

namespace conveyor::model {

namespace {

constexpr int64_t header_bytes = 7 * sizeof(int32_t);

// Number of floats the file holds after the header, given the shape.
int64_t float_count(const llama_shape& s) {
  const int64_t L = s.n_layers, d = s.dim, h = s.hidden_dim, kv = s.kv_dim(), v = s.vocab_size;
  int64_t n = v * d + L * d + L * d * d + 2 * L * kv * d + L * d * d + L * d + 3 * L * h * d + d;
  n += static_cast<int64_t>(s.seq_len) * s.head_size();  // legacy RoPE tables, skipped
  if (!s.shared_classifier) n += v * d;
  return n;
}

std::string describe(const llama_shape& s) {
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "dim=%d hidden_dim=%d n_layers=%d n_heads=%d n_kv_heads=%d vocab_size=%d "
                "seq_len=%d",
                s.dim, s.hidden_dim, s.n_layers, s.n_heads, s.n_kv_heads, s.vocab_size, s.seq_len);
  return buf;
}

error check_shape(const std::string& where, const llama_shape& s) {
  auto bad = [&](const char* why) {
    return make_error(ec::bad_file, where + ": not a llama2.c checkpoint (" + why +
                                        "; header says " + describe(s) + ")");
  };
  if (s.dim <= 0 || s.hidden_dim <= 0 || s.n_layers <= 0 || s.n_heads <= 0 || s.n_kv_heads <= 0 ||
      s.vocab_size <= 0 || s.seq_len <= 0)
    return bad("a header field is not positive");
  if (s.dim > 65536 || s.hidden_dim > 262144 || s.n_layers > 1024 || s.vocab_size > 1048576 ||
      s.seq_len > 1048576)
    return bad("a header field is implausibly large");
  if (s.dim % s.n_heads != 0) return bad("dim is not a multiple of n_heads");
  if (s.n_heads % s.n_kv_heads != 0) return bad("n_heads is not a multiple of n_kv_heads");
  if (s.head_size() % 2 != 0) return bad("head size is odd");
  return {};
}

}  // namespace

int64_t llama_shape::parameter_count() const {
  const int64_t L = n_layers, d = dim, h = hidden_dim, q = q_dim(), kv = kv_dim(), v = vocab_size;
  int64_t n = v * d + 2 * L * d + 2 * L * q * d + 2 * L * kv * d + 3 * L * h * d + d;
  if (!shared_classifier) n += v * d;
  if (qkv_bias) n += L * (q + 2 * kv);
  return n;
}

bool operator==(const llama_shape& a, const llama_shape& b) {
  return a.dim == b.dim && a.hidden_dim == b.hidden_dim && a.n_layers == b.n_layers &&
         a.n_heads == b.n_heads && a.n_kv_heads == b.n_kv_heads && a.vocab_size == b.vocab_size &&
         a.seq_len == b.seq_len && a.shared_classifier == b.shared_classifier &&
         a.head_size() == b.head_size() && a.rope_theta == b.rope_theta &&
         a.rope_scaling.factor == b.rope_scaling.factor &&
         a.rope_scaling.low_freq_factor == b.rope_scaling.low_freq_factor &&
         a.rope_scaling.high_freq_factor == b.rope_scaling.high_freq_factor &&
         a.rope_factors == b.rope_factors &&
         a.rope_scaling.original_max_position_embeddings ==
             b.rope_scaling.original_max_position_embeddings &&
         a.rms_norm_eps == b.rms_norm_eps && a.qkv_bias == b.qkv_bias;
}

expected<llama_shape> read_llama2c_shape(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return make_error(ec::bad_file, path + ": cannot open model file (no such file)");
  if (!S_ISREG(st.st_mode)) return make_error(ec::bad_file, path + ": not a regular file");
  const int64_t actual = st.st_size;
  if (actual < header_bytes)
    return make_error(ec::bad_file,
                      path + ": too short for a llama2.c header: " + std::to_string(actual) +
                          " bytes, need at least " + std::to_string(header_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ec::bad_file, path + ": cannot open model file");
  int32_t h[7];
  in.read(reinterpret_cast<char*>(h), sizeof(h));
  if (!in) return make_error(ec::bad_file, path + ": cannot read the header");
  llama_shape s;
  s.dim = h[0];
  s.hidden_dim = h[1];
  s.n_layers = h[2];
  s.n_heads = h[3];
  s.n_kv_heads = h[4];
  s.shared_classifier = h[5] > 0;
  s.vocab_size = h[5] > 0 ? h[5] : (h[5] == INT32_MIN ? 0 : -h[5]);
  s.seq_len = h[6];
  if (auto err = check_shape(path, s)) return err;
  const int64_t expected_size = header_bytes + float_count(s) * int64_t{sizeof(float)};
  if (actual != expected_size)
    return make_error(ec::bad_file,
                      path + ": wrong size for a llama2.c checkpoint with " + describe(s) +
                          ": expected " + std::to_string(expected_size) + " bytes, found " +
                          std::to_string(actual) +
                          (actual < expected_size ? " (truncated)" : " (extra data)"));
  return s;
}

expected<llama_weights> load_llama2c_checkpoint(const std::string& path) {
  auto shape = read_llama2c_shape(path);
  if (!shape) return shape.error();
  const llama_shape& s = *shape;
  llama_weights w;
  w.shape = s;
  std::ifstream in(path, std::ios::binary);
  in.seekg(header_bytes);
  bool ok = true;
  auto read = [&](std::vector<float>& dst, int64_t count) {
    dst.resize(static_cast<size_t>(count));
    in.read(reinterpret_cast<char*>(dst.data()), count * int64_t{sizeof(float)});
    ok = ok && static_cast<bool>(in);
  };
  const int64_t L = s.n_layers, d = s.dim, h = s.hidden_dim, kv = s.kv_dim(), v = s.vocab_size;
  read(w.token_embedding, v * d);
  read(w.rms_att, L * d);
  read(w.wq, L * d * d);
  read(w.wk, L * kv * d);
  read(w.wv, L * kv * d);
  read(w.wo, L * d * d);
  read(w.rms_ffn, L * d);
  read(w.w1, L * h * d);
  read(w.w2, L * d * h);
  read(w.w3, L * h * d);
  read(w.rms_final, d);
  in.seekg(static_cast<std::streamoff>(int64_t{s.seq_len} * s.head_size() * int64_t{sizeof(float)}),
           std::ios::cur);
  if (!s.shared_classifier) read(w.wcls, v * d);
  if (!ok) return make_error(ec::bad_file, path + ": read error while loading weights");
  return w;
}

expected<llama_shape> synthetic_shape(std::string_view name) {
  llama_shape s;
  if (name == "s15m") {
    s = llama_shape{288, 768, 6, 6, 6, 512, 512, true};
  } else if (name == "s42m") {
    s = llama_shape{512, 1376, 8, 8, 8, 512, 512, true};
  } else if (name == "s1b") {
    // TinyLlama 1.1B's shape: 1.03 billion parameters, grouped-query attention (32 heads on 4).
    s = llama_shape{2048, 5632, 22, 32, 4, 32000, 2048, true};
  } else {
    return make_error(ec::bad_request, "unknown synthetic model 'synthetic:" + std::string{name} +
                                           "'; known: synthetic:s15m, synthetic:s42m, "
                                           "synthetic:s1b");
  }
  return s;
}

expected<llama_weights> make_synthetic_weights(std::string_view name, uint64_t seed) {
  auto shape = synthetic_shape(name);
  if (!shape) return shape.error();
  const llama_shape& s = *shape;
  llama_weights w;
  w.shape = s;
  w.synthetic = true;
  // A fixed generator and a hand-rolled uniform draw keep the bits identical across platforms
  // and standard libraries (std::normal_distribution is not specified bit for bit).
  std::mt19937_64 rng(seed ^ 0x636f6e7665796f72ULL);
  auto fill = [&](std::vector<float>& dst, int64_t count, int64_t fan_in) {
    dst.resize(static_cast<size_t>(count));
    const double bound = std::sqrt(3.0 / static_cast<double>(fan_in));  // unit variance output
    for (auto& x : dst) {
      const double u = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);  // [0,1)
      x = static_cast<float>((2.0 * u - 1.0) * bound);
    }
  };
  auto ones = [](std::vector<float>& dst, int64_t count) { dst.assign(count, 1.0f); };
  const int64_t L = s.n_layers, d = s.dim, h = s.hidden_dim, kv = s.kv_dim(), v = s.vocab_size;
  fill(w.token_embedding, v * d, 2500);  // std 0.02, as trained embeddings are
  ones(w.rms_att, L * d);
  fill(w.wq, L * d * d, d);
  fill(w.wk, L * kv * d, d);
  fill(w.wv, L * kv * d, d);
  fill(w.wo, L * d * d, d * L);
  ones(w.rms_ffn, L * d);
  fill(w.w1, L * h * d, d);
  fill(w.w2, L * d * h, h * L);
  fill(w.w3, L * h * d, d);
  ones(w.rms_final, d);
  return w;
}

}  // namespace conveyor::model
