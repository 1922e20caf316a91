// conveyor generate: one prompt through the executor's own scheduler, printed as it is produced.
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "apps/conveyor/commands.hpp"
#include "apps/conveyor/config_flags.hpp"
#include "common/install_dirs.hpp"
#include "model/causal_lm.hpp"
#include "model/model_info.hpp"
#include "tokenizers/tokenizer.hpp"
#include "pipeline/executor_core.hpp"
#include "pipeline/request_checks.hpp"
#include "sampling/sampling_params.hpp"

namespace conveyor::app {

namespace {

struct generate_options {
  std::string prompt;
  /// The flags bind to these fields. max_tokens has generate's own default (run.c's 256 steps);
  /// the other defaults are everyone's.
  sampling::sampling_params params = [] {
    sampling::sampling_params p;
    p.max_tokens = 256;
    return p;
  }();
  /// -1: a random seed.
  int64_t seed = -1;
  std::string model{default_model_path};
  std::string tokenizer;
  int64_t threads = 0;
  std::string dtype = "auto";
  std::string kv_cache_dtype = "auto";
  bool bf16_inputs = true;
  int32_t context = 0;
  bool show_tokens = false;
  std::string log_level = "warn";
};

int fail_generate(const std::string& message) {
  std::fprintf(stderr, "conveyor generate: %s\n", message.c_str());
  return 1;
}

int run_generate(const generate_options& o) {
  setup_logging(o.log_level);
  sampling::sampling_params params = o.params;
  params.seed = o.seed >= 0 ? uint64_t(o.seed) : std::random_device{}();
  // The limits of a request's fields (conveyor::sampling_limits), before anything loads.
  if (auto problem = pipeline::check_request(params, 0)) return fail_generate(*problem);
  if (o.threads > 0) model::set_compute_threads(int32_t(o.threads));
  const auto model_spec = model::resolve_path(o.model);
  const auto tokenizer_path = model::resolve_path(
      o.tokenizer.empty() ? model::default_tokenizer_for(model_spec) : o.tokenizer);
  auto tok = tokenizers::load_tokenizer(tokenizer_path);
  if (!tok) return fail_generate(message_of(tok.error()));
  model::runtime_options ro;
  ro.slots = 1;
  ro.max_batched_tokens = 512;
  ro.context = o.context;
  auto info = model::inspect_model(model_spec);
  if (!info) return fail_generate(message_of(info.error()));
  auto dtype = model::choose_dtype(o.dtype, ro.device, info->weights_dtype);
  if (!dtype) return fail_generate(message_of(dtype.error()));
  ro.dtype = *dtype;
  auto kv_dtype = model::choose_kv_dtype(o.kv_cache_dtype, *dtype);
  if (!kv_dtype) return fail_generate(message_of(kv_dtype.error()));
  ro.kv_dtype = *kv_dtype;
  ro.bf16_inputs = model::choose_bf16_inputs(o.bf16_inputs, *dtype);
  ro.quantize = model::choose_quantize(o.dtype);
  std::string summary;
  auto m = model::load_model(model_spec, ro, &summary);
  if (!m) return fail_generate(message_of(m.error()));
  if (!summary.empty()) spdlog::info("{}", summary);
  spdlog::info("{}", (*m)->describe());
  // 0 leaves them to the machine, as for serve's and bench's executors: one sequence runs.
  if (o.threads == 0)
    model::set_compute_threads(model::auto_compute_threads(
        (*m)->shape(), 1, int32_t(std::max(1u, std::thread::hardware_concurrency()))));
  std::fprintf(stderr, "%s\n", model::compute_backend_description().c_str());
  sequence_request req;
  req.id = 1;
  auto prompt = (*tok)->encode(o.prompt, true);
  if (!prompt) return fail_generate(message_of(prompt.error()));
  req.prompt = std::move(*prompt);
  if (auto problem = pipeline::check_context(req.prompt.size(), params.max_tokens, (*m)->context()))
    return fail_generate(*problem);
  req.params = std::move(params);
  req.times.arrival = now_stamp();
  pipeline::executor_core core{"cpu:0", std::move(*m), *tok};
  pipeline::step_output admitted;
  core.admit({req}, false, admitted);
  std::fputs(o.prompt.c_str(), stdout);
  std::fflush(stdout);
  std::vector<int32_t> tokens;
  request_result result;
  const auto start = std::chrono::steady_clock::now();
  while (core.has_work()) {
    auto out = core.step();
    for (auto& c : out.chunks) {
      std::fputs(c.text.c_str(), stdout);
      tokens.insert(tokens.end(), c.tokens.begin(), c.tokens.end());
    }
    std::fflush(stdout);
    for (auto& r : out.results) result = r;
  }
  std::fputs(result.tail.c_str(), stdout);
  std::fputc('\n', stdout);  // as run.c does
  std::fflush(stdout);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (result.how != outcome::finished) return fail_generate(result.message);
  if (o.show_tokens) {
    std::string ids;
    for (auto t : tokens) ids += (ids.empty() ? "" : " ") + std::to_string(t);
    std::fprintf(stderr, "tokens: %s\n", ids.c_str());
  }
  std::fprintf(stderr,
               "generated %d tokens in %.3f s (%.1f tokens/s), prompt %zu tokens, finish "
               "reason %s\n",
               result.completion_tokens, seconds,
               seconds > 0 ? result.completion_tokens / seconds : 0.0, req.prompt.size(),
               to_string(result.reason));
  return 0;
}

}  // namespace

command_fn add_generate(CLI::App& app) {
  auto o = std::make_shared<generate_options>();
  auto* cmd = app.add_subcommand("generate",
                                 "Generate text for one prompt and print it as it "
                                 "is produced (the prompt first); tokens/s on stderr");
  cmd->add_option("--prompt,-p", o->prompt, "The prompt text")->required();
  // The limits of these four are checked by run_generate, the same as a request's.
  cmd->add_option("--max-tokens,-n", o->params.max_tokens,
                  "Most tokens to generate; the prompt and these must fit in the context")
      ->capture_default_str();
  cmd->add_option("--temperature,-t", o->params.temperature,
                  "Sampling temperature in [0, 2]; 0 is greedy")
      ->capture_default_str();
  cmd->add_option("--top-p", o->params.top_p,
                  "Nucleus sampling: keep the most likely tokens whose "
                  "probability adds up to P, in (0, 1] (1 keeps all)")
      ->capture_default_str();
  cmd->add_option("--top-k", o->params.top_k, "Keep only the K most likely tokens (0 keeps all)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the sampler (default: random)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--stop", o->params.stop, "Stop before this text (may be repeated)");
  cmd->add_option("--model,-m", o->model,
                  "A Hugging Face model directory (config.json, safetensors, tokenizer.json), a "
                  "llama2.c checkpoint, or synthetic:s15m / synthetic:s42m (random weights)")
      ->capture_default_str();
  cmd->add_option("--tokenizer", o->tokenizer,
                  "A SentencePiece .model or llama2.c .bin vocabulary (default: tok512.model "
                  "beside the model, else the embedded one)");
  cmd->add_option("--dtype", o->dtype,
                  "Compute in auto (bf16 for weights stored in bf16, else f32), f32 or bf16, or "
                  "quantize the weights as they load to q8_0 or q4_0 (model.dtype)")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "q8_0", "q4_0"}))
      ->capture_default_str();
  cmd->add_option("--kv-cache-dtype", o->kv_cache_dtype,
                  "Keep the KV cache in auto (as --dtype), f32 or bf16 (bf16 with f32 compute: "
                  "the CPU's plain-loop network only)")
      ->check(CLI::IsMember({"auto", "f32", "bf16"}))
      ->capture_default_str();
  cmd->add_flag("--bf16-inputs,!--no-bf16-inputs", o->bf16_inputs,
                "With bf16 weights on a processor with AVX-512 BF16: round the products' inputs "
                "to bf16 too, for its dot product (on by default; model.bf16_inputs)");
  cmd->add_option("--context", o->context,
                  "Tokens of context (default 0: the model's own max_position_embeddings)")
      ->check(CLI::NonNegativeNumber);
  add_threads_option(*cmd, o->threads, "Compute threads (default 0: every core, one for a model too small to share a step)");
  cmd->add_flag("--show-tokens", o->show_tokens, "Print the generated token ids on stderr");
  cmd->add_flag("--ignore-eos", o->params.ignore_eos, "Generate exactly --max-tokens tokens");
  cmd->add_option("--log-level", o->log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
  return [o] { return run_generate(*o); };
}

}  // namespace conveyor::app
