// spawn_pipeline: loads the models and wires tokenizers, batcher, executors and metrics.
#include "actors/spawn.hpp"

#include <unistd.h>
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "actors/batcher_actor.hpp"
#include "actors/executor_actor.hpp"
#include "actors/metrics_actor.hpp"
#include "actors/remote_connector.hpp"
#include "actors/tokenizer_actor.hpp"
#include "gpu/devices.hpp"
#include "gpu/placement.hpp"
#include "grammar/grammar_compiler.hpp"
#include "model/causal_lm.hpp"
#include "model/model_info.hpp"
#include "tokenizers/tokenizer.hpp"

namespace conveyor {

namespace {

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * page : 0;
}

}  // namespace

std::string tokenizer_file(const config::pipeline& cfg) {
  return model::resolve_path(cfg.model.tokenizer.empty()
                                 ? model::default_tokenizer_for(model::resolve_path(cfg.model.path))
                                 : cfg.model.tokenizer);
}

namespace {

/// The tokenizer and the shape of the model of `cfg`, checked against each other.
struct model_files {
  std::string model_spec;
  std::shared_ptr<const tokenizers::tokenizer> tokenizer;
  int32_t seq_len = 0;
  /// What the spec names: shape, stored dtype, end ids.
  model::model_info info;
  /// Compiles requests' output formats against the model's vocabulary: the tokenizer workers'
  /// and the executors' (for requests that arrive uncompiled from a remote batcher).
  std::shared_ptr<const grammar::grammar_compiler> grammars;
};

grammar::compile_limits compile_limits_of(const config::structured_outputs& c) {
  grammar::compile_limits l;
  l.timeout = std::chrono::milliseconds{c.compile_timeout_ms};
  l.max_compiling = int32_t(c.max_compiling);
  l.max_spec_bytes = std::size_t(c.max_spec_kb) << 10;
  l.cache_bytes = int64_t(c.cache_mb) << 20;
  return l;
}

expected<model_files> open_model(const config::pipeline& cfg) {
  model_files out;
  out.model_spec = model::resolve_path(cfg.model.path);
  const std::string tokenizer_path = tokenizer_file(cfg);
  auto tokenizer = tokenizers::load_tokenizer(tokenizer_path);
  if (!tokenizer) return tokenizer.error();
  spdlog::info("tokenizer: {} ({} tokens)", tokenizer_path, (*tokenizer)->vocab_size());
  auto info = model::inspect_model(out.model_spec);
  if (!info) return info.error();
  const auto* shape = &info->shape;
  // A Hugging Face model's embedding may have more rows than its tokenizer has tokens (padded
  // to a multiple, as Qwen2's): fewer tokens is fine there, never more.
  const bool padded_vocabulary = info->kind == model::model_kind::hugging_face &&
                                 (*tokenizer)->vocab_size() <= shape->vocab_size;
  if (shape->vocab_size != (*tokenizer)->vocab_size() && out.model_spec != "trivial" &&
      !padded_vocabulary)
    return make_error(ec::bad_config, "tokenizer " + tokenizer_path + " has " +
                                          std::to_string((*tokenizer)->vocab_size()) +
                                          " tokens but model " + out.model_spec + " has " +
                                          std::to_string(shape->vocab_size));
  out.tokenizer = std::move(*tokenizer);
  out.grammars = std::make_shared<const grammar::grammar_compiler>(
      *out.tokenizer, shape->vocab_size, compile_limits_of(cfg.structured_outputs));
  out.seq_len = shape->seq_len;
  out.info = std::move(*info);
  return out;
}

gpu::model_sizes sizes_of(const model::llama_shape& s, model::compute_dtype dtype,
                          const config::kv_cache& kv) {
  return {s, dtype, kv.memory_mb};
}

bool names_cuda(const std::vector<config::executor>& executors) {
  for (const auto& e : executors)
    if (gpu::cuda_index(e.device) >= 0) return true;
  return false;
}

/// "cpu", or "cuda:N" for "cuda" and "cuda:N": the device label of logs and metrics.
std::string canonical_device(const std::string& device) {
  const int32_t index = gpu::cuda_index(device);
  return index < 0 ? device : gpu::device_name(index);
}

expected<executor_group> spawn_executors(caf::actor_system& system, const config::pipeline& cfg,
                                         const model_files& files, metrics_actor metrics,
                                         const std::string& name_prefix,
                                         const spawn_options& options) {
  const auto* shape = &files.info.shape;
  // The dtype of GPU executors (model.dtype "auto" depends on the weights' own dtype).
  auto gpu_dtype = model::choose_dtype(cfg.model.dtype, "cuda", files.info.weights_dtype);
  if (!gpu_dtype) return gpu_dtype.error();
  const gpu::device_provider& provider =
      options.devices != nullptr ? *options.devices : gpu::system_devices();
  // Ask for the devices only when they matter: on a CUDA build that creates a context per GPU.
  std::vector<gpu::device_info> devices;
  if (cfg.auto_executors || names_cuda(cfg.executors)) devices = provider.devices();
  const gpu::listed_devices seen{devices, provider.none_visible_reason()};
  if (cfg.auto_executors) spdlog::info("executors = \"auto\": {}", gpu::describe_devices(seen));
  auto executors = config::resolve_executors(cfg, devices.size());
  // Every device must be visible and hold its executors' weights, KV caches and workspaces.
  auto placed = gpu::check_placement(executors, seen, sizes_of(*shape, *gpu_dtype, cfg.kv_cache));
  if (!placed) return placed.error();
  for (const auto& d : *placed) spdlog::info("placement: {}", gpu::describe(d));
  // Every KV cache is reserved at start: check that the host's fit before allocating any, and
  // that each holds one sequence of its whole context.
  const int64_t memory_mb = cfg.kv_cache.memory_mb;
  const auto block_size = int32_t(cfg.kv_cache.block_size);
  int64_t kv_total = 0;
  for (size_t i = 0; i < executors.size(); ++i) {
    const auto& e = executors[i];
    const bool cpu = e.device == "cpu";
    const int32_t context = e.context == 0 ? shape->seq_len : int32_t(e.context);
    auto dtype =
        cpu ? model::choose_dtype(cfg.model.dtype, "cpu", files.info.weights_dtype) : gpu_dtype;
    if (!dtype) return dtype.error();
    auto kv_dtype = model::choose_kv_dtype(cfg.model.kv_cache_dtype, *dtype);
    if (!kv_dtype) return kv_dtype.error();
    const int32_t one_sequence = (context + block_size - 1) / block_size;
    const int64_t needed = model::kv_cache_bytes(*shape, one_sequence, block_size, *kv_dtype);
    if (memory_mb > 0 && (memory_mb << 20) < needed)
      return make_error(ec::bad_config,
                        "kv_cache.memory_mb = " + std::to_string(memory_mb) +
                            " cannot hold one sequence of executors[" + std::to_string(i) +
                            "]'s context of " + std::to_string(context) + " tokens, which takes " +
                            std::to_string((needed + (1 << 20) - 1) >> 20) + " MiB");
    if (!cpu) continue;  // GPU memory is checked by the placement above
    kv_total += memory_mb > 0 ? memory_mb << 20
                              : model::kv_cache_bytes(*shape, int32_t(e.slots), context, *kv_dtype);
  }
  const int64_t memory = physical_memory_bytes();
  if (memory > 0 && kv_total > memory)
    return make_error(ec::bad_config,
                      "the KV caches need " + std::to_string(kv_total >> 20) + " MiB (" +
                          (memory_mb > 0 ? std::string{"kv_cache.memory_mb"}
                                         : std::string{"slots x context x layers x kv_dim x 2 x "
                                                       "bytes per number"}) +
                          " over all executors) but the machine has " +
                          std::to_string(memory >> 20) + " MiB");
  std::vector<std::unique_ptr<pipeline::executor_core>> cores;
  executor_group group;
  group.model_name = config::served_name(cfg.model);
  for (size_t i = 0; i < executors.size(); ++i) {
    const auto& e = executors[i];
    model::runtime_options opt;
    opt.slots = int32_t(e.slots);
    opt.context = int32_t(e.context);
    opt.max_batched_tokens = int32_t(e.max_batched_tokens);
    opt.device = options.device_map ? options.device_map(e.device) : e.device;
    opt.seed = uint64_t(cfg.model.seed);
    auto dtype = model::choose_dtype(cfg.model.dtype, opt.device, files.info.weights_dtype);
    if (!dtype) return dtype.error();
    opt.dtype = *dtype;
    auto kv_dtype = model::choose_kv_dtype(cfg.model.kv_cache_dtype, *dtype);
    if (!kv_dtype) return kv_dtype.error();
    opt.kv_dtype = *kv_dtype;
    opt.bf16_inputs = model::choose_bf16_inputs(cfg.model.bf16_inputs, *dtype);
    opt.quantize = model::choose_quantize(cfg.model.dtype);
    opt.block_size = block_size;
    if (memory_mb > 0)
      opt.kv_blocks = model::kv_blocks_in(*shape, memory_mb << 20, block_size, *kv_dtype);
    std::string summary;
    auto m = model::load_model(files.model_spec, opt, &summary);
    if (!m)
      return make_error(code_of(m.error()), "executors[" + std::to_string(i) + "] on " + e.device +
                                                ": " + message_of(m.error()));
    const std::string name = name_prefix + e.device + ":" + std::to_string(i);
    const std::string device = canonical_device(e.device);
    std::string where = device;
    if (const int32_t index = gpu::cuda_index(device); index >= 0)
      where += " (" + devices[size_t(index)].name + ")";
    if (opt.device != e.device) where += ", computing on " + opt.device;
    if (!summary.empty()) spdlog::info("executor {}: {}", name, summary);
    spdlog::info("executor {} on {}: {}", name, where, (*m)->describe());
    group.context = group.context == 0 ? (*m)->context() : std::min(group.context, (*m)->context());
    auto core = std::make_unique<pipeline::executor_core>(name, std::move(*m), files.tokenizer,
                                                          cfg.kv_cache.prefix_caching);
    pipeline::step_plan_options plan;
    plan.max_prompt_tokens = e.max_batched_tokens;
    plan.target_ratio = e.step_target_ratio;
    plan.target_ms = e.step_target_ms;
    plan.min_prompt_tokens = e.min_prefill_tokens;
    core->set_step_plan_options(plan);
    core->set_device(device);
    core->set_grammar_compiler(files.grammars);
    core->set_overlap_masks(gpu::cuda_index(device) >= 0);
    cores.push_back(std::move(core));
  }
  const int32_t cores_available = int32_t(std::max(1u, std::thread::hardware_concurrency()));
  for (size_t i = 0; i < cores.size(); ++i) {
    int32_t threads = int32_t(executors[i].threads);
    std::string why;
    if (threads == 0) {
      threads = std::max(1, cores_available / int32_t(cores.size()));
      const auto& m = cores[i]->model();
      if (gpu::cuda_index(cores[i]->device()) < 0 &&
          model::auto_compute_threads(m.shape(), m.slots(), threads) < threads) {
        threads = 1;
        why = " (the model's steps are too small to share)";
      }
    }
    spdlog::info("executor {}: {} compute threads{}", cores[i]->name(), threads, why);
    group.executors.push_back(
        spawn_executor(system, std::move(cores[i]), threads, batcher_actor{}, metrics));
  }
  return group;
}

}  // namespace

expected<executor_group> spawn_executors(caf::actor_system& system, const config::pipeline& cfg,
                                         metrics_actor metrics, const std::string& name_prefix,
                                         const spawn_options& options) {
  if (auto err = config::validate(cfg)) return err;
  auto files = open_model(cfg);
  if (!files) return files.error();
  return spawn_executors(system, cfg, *files, std::move(metrics), name_prefix, options);
}

expected<pipeline_handle> spawn_pipeline(caf::actor_system& system, const config::pipeline& cfg,
                                         const spawn_options& options) {
  if (auto err = config::validate(cfg)) return err;
  if (!cfg.cluster.remote.empty() && !system.has_middleman())
    return make_error(ec::bad_config,
                      "cluster.remote lists workers but the actor system has no middleman: "
                      "load<caf::io::middleman>() and add_message_types() in its config");
  auto files = open_model(cfg);
  if (!files) return files.error();
  pipeline_handle h;
  h.metrics = spawn_metrics(system, cfg.metrics.enabled ? double(cfg.metrics.interval_s) : 0.0);
  auto group = spawn_executors(system, cfg, *files, h.metrics, "", options);
  if (!group) {
    caf::anon_send_exit(h.metrics, caf::exit_reason::user_shutdown);
    return group.error();
  }
  h.model_name = group->model_name;
  // Without local executors the model's own context bounds prompts (workers should match it).
  h.context = group->context != 0 ? group->context : files->seq_len;
  h.executors = std::move(group->executors);
  h.tokenizer = files->tokenizer;
  h.tokenizers = spawn_tokenizer_pool(system, size_t(cfg.tokenizer.workers), files->tokenizer,
                                      h.context, files->grammars);
  batcher_settings bs;
  auto policy = pipeline::parse_policy(cfg.batcher.policy);
  bs.options.policy = policy ? *policy : pipeline::policy_kind::continuous;
  bs.options.max_batch_size = int32_t(cfg.batcher.max_batch_size);
  bs.options.max_wait_s = double(cfg.batcher.max_wait_ms) / 1000.0;
  bs.options.max_num_seqs = int32_t(cfg.batcher.max_num_seqs);
  bs.options.max_batched_tokens = int32_t(cfg.batcher.max_batched_tokens);
  bs.options.max_queued_requests = cfg.batcher.max_queued_requests;
  bs.options.max_queued_tokens = cfg.batcher.max_queued_tokens;
  bs.default_timeout_s = double(cfg.batcher.default_timeout_s);
  auto batcher = spawn_batcher(system, bs, h.tokenizers, h.metrics);
  h.front = batcher;
  if (options.attach_executors)
    for (const auto& e : h.executors)
      caf::anon_send(e, atom::attach::value, batcher_ref{batcher});
  for (const auto& address : cfg.cluster.remote)
    h.connectors.push_back(spawn_remote_connector(system, address, batcher));
  spdlog::info(
      "pipeline: policy {}, {} local executor(s), {} remote worker(s), {} tokenizer "
      "worker(s); {}",
      pipeline::to_string(bs.options.policy), h.executors.size(), cfg.cluster.remote.size(),
      cfg.tokenizer.workers, model::compute_backend_description());
  return h;
}

void stop_pipeline(const pipeline_handle& h) {
  for (const auto& c : h.connectors) caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
  for (const auto& e : h.executors) caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(h.front, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(h.tokenizers, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(h.metrics, caf::exit_reason::user_shutdown);
}

}  // namespace conveyor
