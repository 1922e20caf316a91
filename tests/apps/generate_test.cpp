// The real `conveyor generate`, `config` and `serve` programs: exact output, clear errors.
#include <sys/stat.h>
#include <cstdlib>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "kernels/blas_kernels.hpp"
#include "tests/apps/conveyor_process.hpp"

using namespace conveyor::app::test;

TEST(generate, prints_exactly_the_expected_greedy_story) {
  auto r = run_conveyor(
      "generate --prompt 'Once upon a time' --max-tokens 60 --temperature 0 "
      "--show-tokens");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            read_file(source("models/stories260K/expected/greedy_once_upon_a_time_n64.txt")));
  // The 60 ids after the 5-id prompt on the SEQ line of the .tokens file.
  std::istringstream tokens(
      read_file(source("models/stories260K/expected/greedy_once_upon_a_time_n64.tokens")));
  std::string line, seq;
  while (std::getline(tokens, line))
    if (line.rfind("SEQ ", 0) == 0) seq = line.substr(4);
  std::istringstream ids(seq);
  std::string expected_ids, id;
  for (int i = 0; ids >> id; ++i)
    if (i >= 5) expected_ids += (expected_ids.empty() ? "" : " ") + id;
  EXPECT_NE(r.err.find("tokens: " + expected_ids + "\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos);
  EXPECT_NE(r.err.find("BLAS: "), std::string::npos) << "start-up names the BLAS library";
}

// With a bf16 KV cache (f32 weights) the greedy story of stories260K still equals run.c's in
// all 60 tokens (llama_test measures it in process: the largest logit difference to f32 is 0.1,
// and no two candidates of this story come that close).
TEST(generate, a_bf16_kv_cache_prints_the_same_greedy_story) {
  auto r = run_conveyor(
      "generate --prompt 'Once upon a time' --max-tokens 60 --temperature 0 "
      "--kv-cache-dtype bf16 --log-level info");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            read_file(source("models/stories260K/expected/greedy_once_upon_a_time_n64.txt")));
  EXPECT_NE(r.err.find("in f32 (plain loops, bf16 KV cache, f32 weights and activations)"),
            std::string::npos)
      << r.err;
  auto bad = run_conveyor("generate -p hi --kv-cache-dtype fp8");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--kv-cache-dtype"), std::string::npos) << bad.err;
}

// The program's OpenBLAS runs kernels that fit the processor: Debian 12's OpenBLAS falls back to
// its SSE3 ("Prescott") kernels on a processor newer than it, several times slower, and
// `conveyor` then starts again with OPENBLAS_CORETYPE set (kernels/blas_kernels.hpp). A type the
// user sets is kept.
TEST(generate, openblas_runs_kernels_that_fit_the_processor) {
  auto config_of = [](const std::string& err) {
    const auto at = err.find("BLAS: OpenBLAS (");
    return at == std::string::npos ? std::string{} : err.substr(at, err.find(')', at) - at);
  };
  auto r = run_conveyor("generate -p hi -n 2 -t 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string config = config_of(r.err);
  if (config.empty()) GTEST_SKIP() << "not built with OpenBLAS: " << r.err;
  const auto f = conveyor::kernels::processor_vector_features();
  if (f.avx2_fma) {
    EXPECT_EQ(config.find(" Prescott "), std::string::npos) << config;
  }
  EXPECT_EQ(r.err.find("warning: OpenBLAS runs its"), std::string::npos) << r.err;
  if (!f.avx2_fma) return;  // Haswell's kernels would not run
  ::setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  auto forced = run_conveyor("generate -p hi -n 2 -t 0");
  ::unsetenv("OPENBLAS_CORETYPE");
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(config_of(forced.err).find(" Haswell "), std::string::npos) << forced.err;
}

TEST(generate, an_empty_prompt_prints_what_run_c_prints) {
  // run.c without a prompt starts from BOS and drops the leading space of the first piece.
  auto r = run_conveyor("generate --prompt '' --max-tokens 64 --temperature 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, read_file(source("models/stories260K/expected/greedy_empty_prompt_n64.txt")));
}

TEST(generate, seed_makes_sampling_reproducible) {
  auto a = run_conveyor("generate -p 'The cat' -n 30 -t 0.9 --seed 42");
  auto b = run_conveyor("generate -p 'The cat' -n 30 -t 0.9 --seed 42");
  auto c = run_conveyor("generate -p 'The cat' -n 30 -t 0.9 --seed 43");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(generate, stop_string_and_synthetic_model) {
  auto r = run_conveyor("generate -p 'Once upon a time' -n 60 -t 0 --stop Lily");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Once upon a time, there was a little girl named \n");
  auto s = run_conveyor("generate -p hi -n 7 -t 0 --model synthetic:s15m --show-tokens");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.err.find("generated 7 tokens"), std::string::npos) << s.err;
}

TEST(generate, bad_input_gives_one_clear_line_and_a_failure) {
  auto missing = run_conveyor("generate -p hi --model /nonexistent/model.bin");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_EQ(missing.err,
            "conveyor generate: /nonexistent/model.bin: cannot open model file (no such file)\n");
  auto tok = run_conveyor("generate -p hi --tokenizer /nonexistent/tok.model");
  EXPECT_NE(tok.exit_code, 0);
  EXPECT_NE(tok.err.find("/nonexistent/tok.model"), std::string::npos) << tok.err;
  auto flag = run_conveyor("generate -p hi --max-tokens ten");
  EXPECT_NE(flag.exit_code, 0);
  EXPECT_NE(flag.err.find("--max-tokens"), std::string::npos) << flag.err;
  auto range = run_conveyor("generate -p hi --temperature -1");
  EXPECT_NE(range.exit_code, 0);
  auto too_long = run_conveyor("generate -p hi --max-tokens 600");
  EXPECT_NE(too_long.exit_code, 0);
  EXPECT_NE(too_long.err.find("more than the context of 512 tokens"), std::string::npos)
      << too_long.err;
  auto unknown = run_conveyor("frobnicate");
  EXPECT_NE(unknown.exit_code, 0);
  for (const auto* r : {&missing, &tok, &flag, &range, &too_long, &unknown})
    EXPECT_EQ(r->err.find("terminate"), std::string::npos) << r->err;
}

TEST(generate, sampling_flags_obey_the_limits_of_a_request) {
  // The limits of common/sampling.hpp, the same as the HTTP server's and the configuration's.
  auto hot = run_conveyor("generate -p hi --temperature 2.5");
  EXPECT_EQ(hot.exit_code, 1);
  EXPECT_EQ(hot.err, "conveyor generate: temperature must be between 0 and 2, got 2.5\n");
  auto top_p = run_conveyor("generate -p hi --top-p 0");
  EXPECT_EQ(top_p.exit_code, 1);
  EXPECT_EQ(top_p.err, "conveyor generate: top_p must be greater than 0 and at most 1, got 0\n");
  auto too_long = run_conveyor("generate -p 'Once upon a time' --max-tokens 508");
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_NE(too_long.err.find("conveyor generate: the prompt has 5 tokens and max_tokens is 508: "
                              "together 513, more than the context of 512 tokens\n"),
            std::string::npos)
      << too_long.err;
}

TEST(serve, refuses_a_generation_default_outside_the_request_limits_at_start) {
  // Before, the server started and answered 400 to every request that left temperature out.
  auto r = run_conveyor("serve --port 0 --set generation.temperature=2.5");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "conveyor serve: command line: generation.temperature: must be at most 2, got 2.5\n");
}

TEST(generate, help_explains_every_flag) {
  auto r = run_conveyor("generate --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--prompt", "--max-tokens", "--temperature", "--top-p", "--top-k",
                           "--seed", "--stop", "--model", "--tokenizer"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

TEST(config_command, prints_the_effective_configuration_and_names_bad_keys) {
  auto r = run_conveyor("config --print --set batcher.policy=seed --port 9001");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("policy = \"seed\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("port = 9001"), std::string::npos) << r.out;
  auto bad = run_conveyor("config --set batcher.max_batch_size=0");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("batcher.max_batch_size"), std::string::npos) << bad.err;
  auto file = run_conveyor("config --config " + source("config/conveyor.toml"));
  EXPECT_EQ(file.exit_code, 0) << file.err;
}

TEST(serve_command, an_executor_on_cuda_0_without_a_gpu_fails_at_start_naming_it) {
  struct stat st {};
  if (::stat("/dev/nvidia0", &st) == 0) GTEST_SKIP() << "this machine has an NVIDIA GPU";
  auto r = run_conveyor("serve --port 0 --set executors=cpu,cuda:0");
  EXPECT_EQ(r.exit_code, 1);
  // The CUDA build says no device is visible, the CPU build that it has no CUDA.
  const std::string prefix = "conveyor serve: executors[1]: device cuda:0 is not available: ";
  const std::string cuda_build = prefix + "no CUDA device visible\n";
  const std::string cpu_build =
      prefix + "this build's libtorch has no CUDA (the CUDA build: scripts/setup.sh --cuda)\n";
  const auto at = r.err.find(prefix);
  ASSERT_NE(at, std::string::npos) << r.err;
  const std::string line = r.err.substr(at, r.err.find('\n', at) + 1 - at);
  EXPECT_TRUE(line == cuda_build || line == cpu_build) << line;
  EXPECT_EQ(r.err.find("listening"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
}
