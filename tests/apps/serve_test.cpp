// `conveyor serve --threads N`: the same flag, meaning and check as generate's and bench's; the
// executors' start-up log line shows the threads they compute with. And model.kv_cache_dtype and
// model.bf16_inputs reach the executors' model.
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "kernels/packed_matmul.hpp"
#include "tests/apps/conveyor_process.hpp"

using namespace conveyor::app::test;

namespace {

/// Starts `serve` on a free port with `args`, waits until it is ready, and returns the number
/// of compute threads its first executor logged: cpu:0, or cuda:0:0 where the default placement
/// finds a GPU ("" when it never got there: see the log).
std::string threads_of_serve(std::vector<std::string> args, std::string& log) {
  args.insert(args.begin(), {"serve", "--port", "0", "--log-level", "info"});
  background_conveyor serve{args};
  const auto ready = serve.wait_for("ready: model");
  log = serve.log();
  if (ready.empty()) return "";
  return serve.wait_for("executor (?:cpu:0|cuda:0:0): (\\d+) compute threads");
}

}  // namespace

TEST(serve_command, threads_sets_the_compute_threads_of_each_executor) {
  std::string log;
  EXPECT_EQ(threads_of_serve({"--threads", "3"}, log), "3") << log;
}

TEST(serve_command, threads_overrides_the_configured_executor_threads) {
  std::string log;
  const std::vector<std::string> configured = {"--set", "executors=cpu", "--set",
                                               "executors[0].threads=1"};
  EXPECT_EQ(threads_of_serve(configured, log), "1") << log;
  auto with_flag = configured;
  with_flag.insert(with_flag.end(), {"--threads", "2"});
  EXPECT_EQ(threads_of_serve(with_flag, log), "2") << log;
  // 0 leaves it to the machine, as in the configuration and for bench: every core, but one for
  // a model whose decode steps are too small to share (stories260K with its 16 slots; with 64
  // its classifier is worth sharing).
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  auto automatic = configured;
  automatic.insert(automatic.end(), {"--threads", "0"});
  EXPECT_EQ(threads_of_serve(automatic, log), "1") << log;
  if (cores > 1) {
    EXPECT_NE(log.find("too small to share"), std::string::npos) << log;
  }
  automatic.insert(automatic.end(), {"--set", "executors[0].slots=64"});
  EXPECT_EQ(threads_of_serve(automatic, log), std::to_string(cores)) << log;
}

TEST(serve_command, threads_outside_0_to_1024_is_refused_naming_the_flag) {
  for (const char* bad : {"-1", "1025", "many"}) {
    auto r = run_conveyor(std::string{"serve --port 0 --threads "} + bad);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.err.find("--threads"), std::string::npos) << bad << ": " << r.err;
    EXPECT_EQ(r.err.find("ready"), std::string::npos) << bad << ": " << r.err;
  }
  // generate and bench check it the same way.
  for (const char* command : {"generate -p hi", "bench --rate 1 -n 1"}) {
    auto r = run_conveyor(std::string{command} + " --threads 1025");
    EXPECT_NE(r.exit_code, 0) << command;
    EXPECT_NE(r.err.find("--threads"), std::string::npos) << command << ": " << r.err;
  }
}

namespace {

/// What `serve` with `args` logs of its executor cpu:0's model (its describe() line), "" when it
/// never got there.
std::string model_of_serve(std::vector<std::string> args, std::string& log) {
  args.insert(args.begin(), {"serve", "--port", "0", "--log-level", "info", "--threads", "1"});
  background_conveyor serve{args};
  const auto ready = serve.wait_for("ready: model");
  log = serve.log();
  if (ready.empty()) return "";
  return serve.wait_for("executor cpu:0 on cpu: ([^\\n]*)");
}

}  // namespace

// model.kv_cache_dtype reaches the executors' model: "auto" follows model.dtype, "bf16" keeps
// the cache in bf16 with f32 weights (half the bytes: stories260K's 16 slots x 512 positions x 5
// layers x kv_dim 32 x 2 x 4 bytes = 10 MiB in f32, 5 in bf16).
TEST(serve_command, the_kv_cache_dtype_reaches_the_executors_model) {
  std::string log;
  auto f32 = model_of_serve({"--set", "executors=cpu"}, log);
  EXPECT_NE(f32.find("in f32 (plain loops), 16 slots, context 512, KV cache 512 blocks x 16 "
                     "tokens, 10 MiB"),
            std::string::npos)
      << f32 << "\n"
      << log;
  auto bf16_cache =
      model_of_serve({"--set", "executors=cpu", "--set", "model.kv_cache_dtype=bf16"}, log);
  EXPECT_NE(bf16_cache.find("in f32 (plain loops, bf16 KV cache, f32 weights and activations), 16 "
                            "slots, context 512, KV cache 512 blocks x 16 tokens, 5 MiB"),
            std::string::npos)
      << bf16_cache << "\n"
      << log;
  // kv_cache.memory_mb and block_size reach it too: 2 MiB of f32 blocks of 32 positions are
  // 2 MiB / (5 layers x kv_dim 32 x 2 x 32 x 4 bytes) = 51 blocks.
  auto budget = model_of_serve({"--set", "executors=cpu", "--set", "kv_cache.memory_mb=2", "--set",
                                "kv_cache.block_size=32"},
                               log);
  EXPECT_NE(budget.find("KV cache 51 blocks x 32 tokens, 1 MiB"), std::string::npos)
      << budget << "\n"
      << log;
  auto bf16 = model_of_serve(
      {"--set", "executors=cpu", "--set", "model.dtype=bf16", "--set", "model.bf16_inputs=false"},
      log);
  EXPECT_NE(bf16.find("(plain loops, bf16 weights and KV cache, f32 activations)"),
            std::string::npos)
      << bf16 << "\n" << log;
  auto bf16_f32_cache =
      model_of_serve({"--set", "executors=cpu", "--set", "model.dtype=bf16", "--set",
                      "model.kv_cache_dtype=f32", "--set", "model.bf16_inputs=false"},
                     log);
  EXPECT_NE(bf16_f32_cache.find("(plain loops, bf16 weights, f32 activations and KV cache)"),
            std::string::npos)
      << bf16_f32_cache << "\n" << log;
  auto bad = run_conveyor("serve --port 0 --set model.kv_cache_dtype=fp8");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("model.kv_cache_dtype: must be 'auto', 'f32' or 'bf16', got 'fp8'"),
            std::string::npos)
      << bad.err;
}

// model.bf16_inputs (on by default) reaches the executors' model with model.dtype = bf16 where
// the processor has AVX-512 BF16; false keeps f32 inputs; with f32 weights it changes nothing.
TEST(serve_command, bf16_inputs_reach_the_executors_model_by_default) {
  std::string log;
  auto model = model_of_serve({"--set", "executors=cpu", "--set", "model.dtype=bf16"}, log);
  if (conveyor::kernels::packed_matrix::bf16_dot_instruction())
    EXPECT_NE(model.find("(plain loops, bf16 weights and product inputs (AVX-512 BF16)"),
              std::string::npos)
        << model << "\n"
        << log;
  else
    EXPECT_NE(model.find("(plain loops, bf16 weights and KV cache, f32 activations)"),
              std::string::npos)
        << model << "\n"
        << log;
  model = model_of_serve(
      {"--set", "executors=cpu", "--set", "model.dtype=bf16", "--set", "model.bf16_inputs=false"},
      log);
  EXPECT_NE(model.find("(plain loops, bf16 weights and KV cache, f32 activations)"),
            std::string::npos)
      << model << "\n"
      << log;
  model = model_of_serve({"--set", "executors=cpu", "--set", "model.bf16_inputs=true"}, log);
  EXPECT_NE(model.find(" in f32 (plain loops)"), std::string::npos) << model << "\n" << log;
}

// A KV cache the machine cannot hold stops the start, naming both sizes.
TEST(serve_command, a_kv_cache_budget_the_machine_cannot_hold_stops_the_start) {
  auto r = run_conveyor(
      "serve --port 0 --threads 1 --set executors=cpu --set "
      "kv_cache.memory_mb=2000000000");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("the KV caches need 2000000000 MiB (kv_cache.memory_mb over all "
                       "executors) but the machine has "),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("ready"), std::string::npos) << r.err;
}
