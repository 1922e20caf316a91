// The placement check: visible devices and free memory per device, before any model loads.
#include "gpu/placement.hpp"

#include <algorithm>
#include <map>

namespace conveyor::gpu {

int64_t weight_bytes(const model_sizes& m) {
  return m.shape.parameter_count() * model::bytes_per_element(m.dtype);
}

int64_t kv_cache_bytes(const model_sizes& m, int64_t slots, int64_t context) {
  if (m.kv_cache_mb > 0) return m.kv_cache_mb << 20;
  return model::kv_cache_bytes(m.shape, int32_t(slots),
                               int32_t(context == 0 ? m.shape.seq_len : context), m.dtype);
}

int64_t workspace_bytes(const model_sizes& m, const config::executor& e) {
  const auto& s = m.shape;
  const int64_t context = e.context == 0 ? s.seq_len : e.context;
  const int64_t tokens = std::max({e.max_batched_tokens, e.slots, context});
  const int64_t d = std::max(s.dim, s.q_dim()), h = s.hidden_dim, v = s.vocab_size;
  const int64_t hs = s.head_size();
  const int64_t kv = s.kv_dim();
  // One forward pass of the GPU network's workspace: x, xb, sq, q, att, xf, xfn and the fused qkv
  // (d + 2 kv), rotary rows, the fused w1/w3 output (2 h) and its product (h), the logits;
  // token ids, positions and cache rows as 64-bit integers.
  const int64_t per_token = 8 * d + 3 * kv + 3 * h + hs + v + 2;
  const int64_t index_bytes = tokens * (3 + s.n_kv_heads) * 8;
  // The decode step: every slot's blocks gathered, then its keys and values laid out by head;
  // scores, probabilities and mask.
  const int64_t decode =
      3 * e.slots * context * kv + 2 * e.slots * s.n_heads * context + e.slots * context;
  return cuda_context_margin_bytes + (tokens * per_token + decode) * model::bytes_per_element(m.dtype) +
         index_bytes;
}

std::string describe(const device_demand& d) {
  const size_t n = d.executors.size();
  return device_name(d.device.index) + " (" + d.device.name + "): needs " +
         human_bytes(d.total_bytes()) + " (weights " + human_bytes(d.weight_bytes) +
         " + KV cache " + human_bytes(d.kv_cache_bytes) + " + workspace " +
         human_bytes(d.workspace_bytes) + " for " + std::to_string(n) +
         (n == 1 ? " executor" : " executors") + "), " + human_bytes(d.device.free_bytes) + " free";
}

expected<std::vector<device_demand>> check_placement(const std::vector<config::executor>& executors,
                                                     const std::vector<device_info>& devices,
                                                     std::string_view none_visible_reason,
                                                     const model_sizes& model) {
  std::vector<std::string> problems;
  std::map<int32_t, device_demand> used;
  for (size_t i = 0; i < executors.size(); ++i) {
    const auto& e = executors[i];
    const int32_t index = cuda_index(e.device);
    if (index < 0) continue;  // "cpu"
    if (index >= int32_t(devices.size())) {
      std::string why;
      if (devices.empty()) {
        why = std::string{none_visible_reason};
      } else {
        why = std::to_string(devices.size()) + " CUDA device(s) visible (cuda:0 to " +
              device_name(int32_t(devices.size()) - 1) + ")";
      }
      problems.push_back("executors[" + std::to_string(i) + "]: device " + e.device +
                         " is not available: " + why);
      continue;
    }
    auto& d = used[index];
    d.device = devices[size_t(index)];
    d.executors.push_back(i);
    d.weight_bytes += weight_bytes(model);
    d.kv_cache_bytes += kv_cache_bytes(model, e.slots, e.context);
    d.workspace_bytes += workspace_bytes(model, e);
  }
  std::vector<device_demand> out;
  for (auto& [index, d] : used) {
    if (d.total_bytes() > d.device.free_bytes) problems.push_back(describe(d));
    out.push_back(std::move(d));
  }
  if (problems.empty()) return out;
  std::string msg;
  for (const auto& p : problems) msg += (msg.empty() ? "" : "\n") + p;
  return make_error(ec::bad_config, std::move(msg));
}

expected<std::vector<device_demand>> check_placement(const std::vector<config::executor>& executors,
                                                     const device_provider& provider,
                                                     const model_sizes& model) {
  return check_placement(executors, provider.devices(), provider.none_visible_reason(), model);
}

}  // namespace conveyor::gpu
