// The configuration: defaults, the shipped file, every kind of error, overrides, round-trips.
#include "config/config.hpp"

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace conveyor::config {

/// Prints a pipeline as TOML in GoogleTest failure messages.
void PrintTo(const pipeline& x, std::ostream* os) {
  *os << "\n" << to_toml(x);
}

namespace {

const std::string source_dir = CONVEYOR_SOURCE_DIR;

std::string read_text(const std::string& path) {
  std::ifstream in{path};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Loads `toml` as "conveyor.toml" and returns the error message, or "" on success.
std::string load_error(std::string_view toml) {
  auto result = load_string(toml, "conveyor.toml");
  if (result) return "";
  EXPECT_EQ(code_of(result.error()), ec::bad_config);
  return message_of(result.error());
}

pipeline load_ok(std::string_view toml) {
  auto result = load_string(toml, "conveyor.toml");
  if (!result) {
    ADD_FAILURE() << message_of(result.error());
    return {};
  }
  return *result;
}

std::string override_error(pipeline& cfg, std::string_view key, std::string_view value) {
  return message_of(apply_override(cfg, key, value));
}

// -- defaults
// --------------------------------------------------------------------------------------

TEST(config_defaults, every_key_has_its_documented_default) {
  pipeline x;
  EXPECT_EQ(x.model.path, "models/stories260K/stories260K.bin");
  EXPECT_EQ(x.model.tokenizer, "");
  EXPECT_EQ(x.model.name, "");
  EXPECT_EQ(x.model.seed, 0);
  EXPECT_EQ(x.model.dtype, "auto");
  EXPECT_EQ(x.model.kv_cache_dtype, "auto");
  EXPECT_TRUE(x.model.bf16_inputs);
  EXPECT_EQ(x.tokenizer.workers, 2);
  EXPECT_TRUE(x.auto_executors);
  EXPECT_TRUE(x.executors.empty());
  EXPECT_TRUE(x.cluster.remote.empty());
  EXPECT_EQ(x.batcher.policy, "continuous");
  EXPECT_EQ(x.batcher.max_batch_size, 16);
  EXPECT_EQ(x.batcher.max_wait_ms, 5);
  EXPECT_EQ(x.batcher.max_num_seqs, 16);
  EXPECT_EQ(x.batcher.max_batched_tokens, 2048);
  EXPECT_EQ(x.batcher.max_queued_requests, 1024);
  EXPECT_EQ(x.batcher.max_queued_tokens, 1048576);
  EXPECT_EQ(x.batcher.default_timeout_s, 0);
  EXPECT_EQ(x.generation.max_tokens, 16);
  EXPECT_EQ(x.generation.temperature, 1.0);
  EXPECT_EQ(x.generation.top_p, 1.0);
  EXPECT_EQ(x.generation.top_k, 0);
  EXPECT_TRUE(x.metrics.enabled);
  EXPECT_EQ(x.metrics.interval_s, 10);
  EXPECT_EQ(x.server.host, "127.0.0.1");
  EXPECT_EQ(x.server.port, 8080);
  EXPECT_EQ(x.server.max_body_bytes, 1048576);
  EXPECT_EQ(x.server.max_header_bytes, 16384);
  EXPECT_EQ(x.server.idle_timeout_s, 60);
  EXPECT_EQ(x.server.header_timeout_s, 10);
  EXPECT_EQ(x.server.max_connections, 1024);
  EXPECT_EQ(x.server.max_connections_per_address, 256);
  EXPECT_EQ(x.server.drain_timeout_s, 10);
  EXPECT_EQ(x.server.io_threads, 1);
  EXPECT_EQ(x.server.max_stream_buffer_bytes, 1048576);
  EXPECT_EQ(x.server.stream_interval, 16);
  EXPECT_EQ(x.server.stream_delay_ms, 2);
  EXPECT_EQ(x.server.max_prompts, 64);
  EXPECT_EQ(x.server.max_n, 16);
  EXPECT_EQ(x.log.level, "info");
  executor e;
  EXPECT_EQ(e.device, "cpu");
  EXPECT_EQ(e.threads, 0);
  EXPECT_EQ(e.slots, 16);
  EXPECT_EQ(e.context, 0);
  EXPECT_EQ(e.max_batched_tokens, 2048);
  EXPECT_EQ(e.step_target_ratio, 1.25);
  EXPECT_EQ(e.step_target_ms, 0.0);
  EXPECT_EQ(e.min_prefill_tokens, 16);
}

TEST(config_defaults, are_valid) {
  EXPECT_EQ(message_of(validate(pipeline{})), "");
}

TEST(config_defaults, an_empty_file_is_the_default_configuration) {
  EXPECT_EQ(load_ok(""), pipeline{});
  EXPECT_EQ(load_ok("# nothing but a comment\n"), pipeline{});
}

TEST(config_defaults, the_shipped_file_loads_and_equals_the_defaults) {
  auto result = load_file(source_dir + "/config/conveyor.toml");
  ASSERT_TRUE(result) << message_of(result.error());
  EXPECT_EQ(*result, pipeline{});
}

TEST(config_defaults, every_key_is_documented_in_the_shipped_file_and_the_reference) {
  auto shipped = read_text(source_dir + "/config/conveyor.toml");
  auto reference = read_text(source_dir + "/docs/configuration.md");
  ASSERT_FALSE(reference.empty());
  auto all = keys();
  EXPECT_EQ(all.size(), 57u);
  for (const auto& key : all) {
    auto leaf = key.substr(key.rfind('.') + 1);
    EXPECT_NE(shipped.find(leaf + " = "), std::string::npos) << key;
    EXPECT_NE(reference.find("`" + key + "`"), std::string::npos) << key;
  }
}

TEST(config_defaults, keys_are_listed_in_file_order) {
  auto all = keys();
  ASSERT_GE(all.size(), 10u);
  EXPECT_EQ(all[0], "model.path");
  EXPECT_EQ(all[4], "model.chat_template");
  EXPECT_EQ(all[5], "model.tool_call_parser");
  EXPECT_EQ(all[6], "model.dtype");
  EXPECT_EQ(all[7], "model.kv_cache_dtype");
  EXPECT_EQ(all[8], "model.bf16_inputs");
  EXPECT_EQ(all[9], "tokenizer.workers");
  EXPECT_EQ(all[10], "executors");
  EXPECT_EQ(all[11], "executors[].device");
  EXPECT_EQ(all[16], "executors[].step_target_ratio");
  EXPECT_EQ(all[19], "kv_cache.block_size");
  EXPECT_EQ(all[21], "kv_cache.prefix_caching");
  EXPECT_EQ(all[22], "structured_outputs.compile_timeout_ms");
  EXPECT_EQ(all[26], "cluster.remote");
  EXPECT_EQ(all.back(), "log.level");
}

// -- loading values
// --------------------------------------------------------------------------------

TEST(config_load, reads_every_section) {
  auto x = load_ok(R"(
[model]
path = "synthetic:s15m"
tokenizer = "tok.model"
name = "tiny"
seed = 7
kv_cache_dtype = "bf16"
bf16_inputs = false

[tokenizer]
workers = 4

[[executors]]
device = "cuda:1"
threads = 2
slots = 8
context = 256
max_batched_tokens = 512
step_target_ratio = 2.5
step_target_ms = 12.5
min_prefill_tokens = 4

[cluster]
remote = ["gpu1:7000", "gpu2:7000"]

[batcher]
policy = "seed"
max_batch_size = 8
max_wait_ms = 20
max_num_seqs = 32
max_batched_tokens = 4096
max_queued_requests = 10
max_queued_tokens = 1000
default_timeout_s = 30

[generation]
max_tokens = 64
temperature = 0
top_p = 0.9
top_k = 40

[metrics]
enabled = false
interval_s = 0

[server]
host = "0.0.0.0"
port = 9000
max_body_bytes = 1000
max_header_bytes = 2000
idle_timeout_s = 5
header_timeout_s = 2
max_connections = 3
max_connections_per_address = 2
drain_timeout_s = 0
io_threads = 2

[log]
level = "debug"
)");
  EXPECT_EQ(x.model.path, "synthetic:s15m");
  EXPECT_EQ(x.model.tokenizer, "tok.model");
  EXPECT_EQ(x.model.name, "tiny");
  EXPECT_EQ(x.model.seed, 7);
  EXPECT_EQ(x.model.kv_cache_dtype, "bf16");
  EXPECT_FALSE(x.model.bf16_inputs);
  EXPECT_EQ(x.tokenizer.workers, 4);
  EXPECT_FALSE(x.auto_executors);
  ASSERT_EQ(x.executors.size(), 1u);
  EXPECT_EQ(x.executors[0].device, "cuda:1");
  EXPECT_EQ(x.executors[0].threads, 2);
  EXPECT_EQ(x.executors[0].slots, 8);
  EXPECT_EQ(x.executors[0].context, 256);
  EXPECT_EQ(x.executors[0].max_batched_tokens, 512);
  EXPECT_EQ(x.executors[0].step_target_ratio, 2.5);
  EXPECT_EQ(x.executors[0].step_target_ms, 12.5);
  EXPECT_EQ(x.executors[0].min_prefill_tokens, 4);
  EXPECT_EQ(x.cluster.remote, (std::vector<std::string>{"gpu1:7000", "gpu2:7000"}));
  EXPECT_EQ(x.batcher.policy, "seed");
  EXPECT_EQ(x.batcher.max_batch_size, 8);
  EXPECT_EQ(x.batcher.max_wait_ms, 20);
  EXPECT_EQ(x.batcher.max_num_seqs, 32);
  EXPECT_EQ(x.batcher.max_batched_tokens, 4096);
  EXPECT_EQ(x.batcher.max_queued_requests, 10);
  EXPECT_EQ(x.batcher.max_queued_tokens, 1000);
  EXPECT_EQ(x.batcher.default_timeout_s, 30);
  EXPECT_EQ(x.generation.max_tokens, 64);
  EXPECT_EQ(x.generation.temperature, 0.0);  // an integer is accepted for a real
  EXPECT_EQ(x.generation.top_p, 0.9);
  EXPECT_EQ(x.generation.top_k, 40);
  EXPECT_FALSE(x.metrics.enabled);
  EXPECT_EQ(x.metrics.interval_s, 0);
  EXPECT_EQ(x.server.host, "0.0.0.0");
  EXPECT_EQ(x.server.port, 9000);
  EXPECT_EQ(x.server.max_body_bytes, 1000);
  EXPECT_EQ(x.server.max_header_bytes, 2000);
  EXPECT_EQ(x.server.idle_timeout_s, 5);
  EXPECT_EQ(x.server.header_timeout_s, 2);
  EXPECT_EQ(x.server.max_connections, 3);
  EXPECT_EQ(x.server.max_connections_per_address, 2);
  EXPECT_EQ(x.server.drain_timeout_s, 0);
  EXPECT_EQ(x.server.io_threads, 2);
  EXPECT_EQ(x.log.level, "debug");
}

TEST(config_load, keeps_defaults_for_missing_keys) {
  auto x = load_ok("[server]\nport = 8081\n");
  pipeline expected;
  expected.server.port = 8081;
  EXPECT_EQ(x, expected);
}

TEST(config_load, accepts_dotted_keys_and_inline_tables) {
  auto x = load_ok("batcher.policy = \"seed\"\nserver = { port = 1234 }\n");
  EXPECT_EQ(x.batcher.policy, "seed");
  EXPECT_EQ(x.server.port, 1234);
}

// -- executors
// -------------------------------------------------------------------------------------

TEST(config_executors, auto_is_the_default_and_can_be_written) {
  auto x = load_ok("executors = \"auto\"\n");
  EXPECT_TRUE(x.auto_executors);
  EXPECT_TRUE(x.executors.empty());
  EXPECT_EQ(x, pipeline{});
}

TEST(config_executors, a_list_replaces_auto_and_keeps_defaults_per_entry) {
  auto x = load_ok("[[executors]]\ndevice = \"cuda:0\"\n\n[[executors]]\nslots = 4\n");
  EXPECT_FALSE(x.auto_executors);
  ASSERT_EQ(x.executors.size(), 2u);
  EXPECT_EQ(x.executors[0].device, "cuda:0");
  EXPECT_EQ(x.executors[0].slots, 16);
  EXPECT_EQ(x.executors[1].device, "cpu");
  EXPECT_EQ(x.executors[1].slots, 4);
}

TEST(config_executors, resolve_gives_one_per_gpu_or_one_cpu) {
  pipeline x;
  auto cpu_only = resolve_executors(x, 0);
  ASSERT_EQ(cpu_only.size(), 1u);
  EXPECT_EQ(cpu_only[0].device, "cpu");
  auto gpus = resolve_executors(x, 2);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].device, "cuda:0");
  EXPECT_EQ(gpus[1].device, "cuda:1");
  EXPECT_EQ(gpus[1].slots, 16);
  x.auto_executors = false;
  x.executors = {executor{}, executor{}, executor{}};
  EXPECT_EQ(resolve_executors(x, 2).size(), 3u);
}

TEST(config_executors, wrong_shapes_are_refused) {
  EXPECT_EQ(load_error("executors = \"gpu\"\n"),
            "conveyor.toml:1: executors: must be \"auto\" or [[executors]] tables, got 'gpu'");
  EXPECT_EQ(load_error("executors = 3\n"),
            "conveyor.toml:1: executors: must be \"auto\" or [[executors]] tables, got an integer");
  EXPECT_EQ(load_error("executors = [1]\n"),
            "conveyor.toml:1: executors[0]: expected a table, got an integer");
  EXPECT_EQ(load_error("executors = []\n"),
            "conveyor.toml:1: executors: must list at least one executor, or be \"auto\"");
}

TEST(config_executors, an_empty_list_is_fine_when_workers_do_the_work) {
  auto x = load_ok("executors = []\n[cluster]\nremote = [\"127.0.0.1:7001\"]\n");
  EXPECT_FALSE(x.auto_executors);
  EXPECT_TRUE(x.executors.empty());
  EXPECT_EQ(load_string(to_toml(x), "printed").value(), x);
  pipeline y;
  ASSERT_FALSE(apply_override(y, "executors", "none"));
  EXPECT_TRUE(validate(y));  // no local executor and no worker
  ASSERT_FALSE(apply_override(y, "cluster.remote", "127.0.0.1:7001"));
  EXPECT_FALSE(validate(y));
}

// -- unknown keys
// ----------------------------------------------------------------------------------

TEST(config_errors, unknown_top_level_key) {
  EXPECT_EQ(load_error("answer = 42\n"), "conveyor.toml:1: unknown key 'answer'");
  EXPECT_EQ(load_error("\n[modle]\npath = \"x\"\n"),
            "conveyor.toml:2: unknown key 'modle'; did you mean 'model'?");
  EXPECT_EQ(load_error("port = 8081\n"),
            "conveyor.toml:1: unknown key 'port'; did you mean 'server.port'?");
}

TEST(config_errors, unknown_nested_key) {
  EXPECT_EQ(load_error("[batcher]\npolicy = \"seed\"\npolcy = \"seed\"\n"),
            "conveyor.toml:3: unknown key 'batcher.polcy'; did you mean 'batcher.policy'?");
  EXPECT_EQ(load_error("[server]\nwhatever = 1\n"),
            "conveyor.toml:2: unknown key 'server.whatever'");
  EXPECT_EQ(load_error("[server]\npolicy = \"seed\"\n"),
            "conveyor.toml:2: unknown key 'server.policy'; did you mean 'batcher.policy'?");
  EXPECT_EQ(load_error("[server.tls]\ncert = \"x\"\n"),
            "conveyor.toml:1: unknown key 'server.tls'");
}

TEST(config_errors, unknown_key_inside_executors) {
  EXPECT_EQ(load_error("[[executors]]\ndevice = \"cpu\"\n\n[[executors]]\nslot = 4\n"),
            "conveyor.toml:5: unknown key 'executors[1].slot'; did you mean 'executors[1].slots'?");
}

TEST(config_errors, a_top_level_key_after_a_table_gets_a_hint) {
  EXPECT_EQ(load_error("[log]\nlevel = \"info\"\nexecutors = \"auto\"\n"),
            "conveyor.toml:3: unknown key 'log.executors'; did you mean 'executors'? (a top-level "
            "key must come before the first [table])");
}

// -- wrong types
// -----------------------------------------------------------------------------------

TEST(config_errors, wrong_types) {
  EXPECT_EQ(load_error("[server]\nport = \"8080\"\n"),
            "conveyor.toml:2: server.port: expected an integer, got a string");
  EXPECT_EQ(
      load_error("[generation]\nmax_tokens = 16.5\n"),
      "conveyor.toml:2: generation.max_tokens: expected an integer, got a floating-point number");
  EXPECT_EQ(load_error("[generation]\ntemperature = \"hot\"\n"),
            "conveyor.toml:2: generation.temperature: expected a number, got a string");
  EXPECT_EQ(load_error("[metrics]\nenabled = 1\n"),
            "conveyor.toml:2: metrics.enabled: expected a boolean, got an integer");
  EXPECT_EQ(load_error("[model]\npath = 3\n"),
            "conveyor.toml:2: model.path: expected a string, got an integer");
  EXPECT_EQ(load_error("[cluster]\nremote = \"a:1\"\n"),
            "conveyor.toml:2: cluster.remote: expected an array of strings, got a string");
  EXPECT_EQ(load_error("[cluster]\nremote = [\"a:1\", 2]\n"),
            "conveyor.toml:2: cluster.remote[1]: expected a string, got an integer");
  EXPECT_EQ(load_error("batcher = 3\n"),
            "conveyor.toml:1: batcher: expected a table, got an integer");
  EXPECT_EQ(load_error("[[executors]]\nslots = \"many\"\n"),
            "conveyor.toml:2: executors[0].slots: expected an integer, got a string");
  EXPECT_EQ(load_error("[server]\nport = 1979-05-27\n"),
            "conveyor.toml:2: server.port: expected an integer, got a date");
}

// -- impossible values
// -----------------------------------------------------------------------------

struct bad_value {
  const char* toml;
  const char* message;
};

/// Names a case by its expected message (one line, unlike the file).
void PrintTo(const bad_value& x, std::ostream* os) {
  *os << x.message;
}

class config_impossible : public testing::TestWithParam<bad_value> {};

TEST_P(config_impossible, is_named_with_line_and_key) {
  EXPECT_EQ(load_error(GetParam().toml), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    every_rule, config_impossible,
    testing::Values(
        bad_value{"[model]\npath = \"\"\n", "conveyor.toml:2: model.path: must not be empty"},
        bad_value{"[model]\npath = \"synthetic:s7b\"\n",
                  "conveyor.toml:2: model.path: unknown synthetic model 'synthetic:s7b', use "
                  "'synthetic:s15m', 'synthetic:s42m' or 'synthetic:s1b'"},
        bad_value{"[model]\nseed = -1\n",
                  "conveyor.toml:2: model.seed: must be at least 0, got -1"},
        bad_value{"[model]\ndtype = \"f16\"\n",
                  "conveyor.toml:2: model.dtype: must be 'auto', 'f32', 'bf16', 'q8_0' or 'q4_0', "
                  "got 'f16'"},
        bad_value{"[model]\nkv_cache_dtype = \"fp8\"\n",
                  "conveyor.toml:2: model.kv_cache_dtype: must be 'auto', 'f32' or 'bf16', got "
                  "'fp8'"},
        bad_value{"[model]\ntool_call_parser = \"mistral\"\n",
                  "conveyor.toml:2: model.tool_call_parser: must be '', 'hermes' or "
                  "'llama3_json', got 'mistral'"},
        bad_value{"[tokenizer]\nworkers = 0\n",
                  "conveyor.toml:2: tokenizer.workers: must be at least 1, got 0"},
        bad_value{
            "[[executors]]\ndevice = \"gpu\"\n",
            "conveyor.toml:2: executors[0].device: must be 'cpu', 'cuda' or 'cuda:N', got 'gpu'"},
        bad_value{"[[executors]]\ndevice = \"cuda:\"\n",
                  "conveyor.toml:2: executors[0].device: must be 'cpu', 'cuda' or 'cuda:N', got "
                  "'cuda:'"},
        bad_value{"[[executors]]\ndevice = \"cuda:x\"\n",
                  "conveyor.toml:2: executors[0].device: must be 'cpu', 'cuda' or 'cuda:N', got "
                  "'cuda:x'"},
        bad_value{"[[executors]]\nthreads = -2\n",
                  "conveyor.toml:2: executors[0].threads: must be at least 0, got -2"},
        bad_value{"[[executors]]\nslots = 0\n",
                  "conveyor.toml:2: executors[0].slots: must be at least 1, got 0"},
        bad_value{"[[executors]]\ncontext = -1\n",
                  "conveyor.toml:2: executors[0].context: must be at least 0, got -1"},
        bad_value{"[[executors]]\nstep_target_ratio = 0.5\n",
                  "conveyor.toml:2: executors[0].step_target_ratio: must be at least 1, got 0.5"},
        bad_value{"[[executors]]\nstep_target_ms = -1\n",
                  "conveyor.toml:2: executors[0].step_target_ms: must be at least 0, got -1"},
        bad_value{"[[executors]]\nmin_prefill_tokens = 0\n",
                  "conveyor.toml:2: executors[0].min_prefill_tokens: must be at least 1, got 0"},
        bad_value{"[[executors]]\nmax_batched_tokens = 0\n",
                  "conveyor.toml:2: executors[0].max_batched_tokens: must be at least 1, got 0"},
        bad_value{
            "[cluster]\nremote = [\"a:1\", \"nohost\"]\n",
            "conveyor.toml:2: cluster.remote[1]: must be 'host:port' with a port from 1 to 65535, "
            "got 'nohost'"},
        bad_value{
            "[cluster]\nremote = [\"a:70000\"]\n",
            "conveyor.toml:2: cluster.remote[0]: must be 'host:port' with a port from 1 to 65535, "
            "got 'a:70000'"},
        bad_value{"[cluster]\nremote = [\"a:1\", \"a:1\"]\n",
                  "conveyor.toml:2: cluster.remote[1]: repeats cluster.remote[0] ('a:1')"},
        bad_value{
            "[batcher]\npolicy = \"fifo\"\n",
            "conveyor.toml:2: batcher.policy: must be one of 'sequential', 'seed', 'continuous', "
            "got 'fifo'"},
        bad_value{"[batcher]\nmax_batch_size = 0\n",
                  "conveyor.toml:2: batcher.max_batch_size: must be at least 1, got 0"},
        bad_value{"[batcher]\nmax_wait_ms = -5\n",
                  "conveyor.toml:2: batcher.max_wait_ms: must be at least 0, got -5"},
        bad_value{"[batcher]\nmax_num_seqs = 0\n",
                  "conveyor.toml:2: batcher.max_num_seqs: must be at least 1, got 0"},
        bad_value{"[batcher]\nmax_batched_tokens = 0\n",
                  "conveyor.toml:2: batcher.max_batched_tokens: must be at least 1, got 0"},
        bad_value{"[batcher]\nmax_queued_requests = 0\n",
                  "conveyor.toml:2: batcher.max_queued_requests: must be at least 1, got 0"},
        bad_value{"[batcher]\nmax_queued_tokens = -1\n",
                  "conveyor.toml:2: batcher.max_queued_tokens: must be at least 1, got -1"},
        bad_value{"[batcher]\ndefault_timeout_s = -1\n",
                  "conveyor.toml:2: batcher.default_timeout_s: must be at least 0, got -1"},
        bad_value{"[batcher]\ndefault_timeout_s = 10000000000\n",
                  "conveyor.toml:2: batcher.default_timeout_s: must be at most 31536000, got "
                  "10000000000"},
        bad_value{"[generation]\nmax_tokens = 0\n",
                  "conveyor.toml:2: generation.max_tokens: must be at least 1, got 0"},
        bad_value{"[generation]\ntemperature = -0.5\n",
                  "conveyor.toml:2: generation.temperature: must be at least 0, got -0.5"},
        bad_value{"[generation]\ntemperature = nan\n",
                  "conveyor.toml:2: generation.temperature: must be a number, got nan"},
        bad_value{"[generation]\ntemperature = inf\n",
                  "conveyor.toml:2: generation.temperature: must be finite, got inf"},
        bad_value{"[generation]\ntop_p = 0.0\n",
                  "conveyor.toml:2: generation.top_p: must be greater than 0, got 0"},
        bad_value{"[generation]\ntop_p = 1.5\n",
                  "conveyor.toml:2: generation.top_p: must be at most 1, got 1.5"},
        bad_value{"[generation]\ntop_k = -1\n",
                  "conveyor.toml:2: generation.top_k: must be at least 0, got -1"},
        bad_value{"[metrics]\ninterval_s = -1\n",
                  "conveyor.toml:2: metrics.interval_s: must be at least 0, got -1"},
        bad_value{"[server]\nhost = \"\"\n", "conveyor.toml:2: server.host: must not be empty"},
        bad_value{"[server]\nport = 70000\n",
                  "conveyor.toml:2: server.port: must be at most 65535, got 70000"},
        bad_value{"[server]\nport = -1\n",
                  "conveyor.toml:2: server.port: must be at least 0, got -1"},
        bad_value{"[server]\nmax_body_bytes = 0\n",
                  "conveyor.toml:2: server.max_body_bytes: must be at least 1, got 0"},
        bad_value{"[server]\nmax_header_bytes = 0\n",
                  "conveyor.toml:2: server.max_header_bytes: must be at least 1, got 0"},
        bad_value{"[server]\nidle_timeout_s = 0\n",
                  "conveyor.toml:2: server.idle_timeout_s: must be at least 1, got 0"},
        bad_value{"[server]\nmax_connections = 0\n",
                  "conveyor.toml:2: server.max_connections: must be at least 1, got 0"},
        bad_value{"[server]\nheader_timeout_s = 0\n",
                  "conveyor.toml:2: server.header_timeout_s: must be at least 1, got 0"},
        bad_value{"[server]\nheader_timeout_s = 86401\n",
                  "conveyor.toml:2: server.header_timeout_s: must be at most 86400, got 86401"},
        bad_value{"[server]\nmax_connections_per_address = 0\n",
                  "conveyor.toml:2: server.max_connections_per_address: must be at least 1, got 0"},
        bad_value{"[server]\ndrain_timeout_s = -1\n",
                  "conveyor.toml:2: server.drain_timeout_s: must be at least 0, got -1"},
        bad_value{"[server]\nio_threads = 0\n",
                  "conveyor.toml:2: server.io_threads: must be at least 1, got 0"},
        bad_value{
            "[log]\nlevel = \"verbose\"\n",
            "conveyor.toml:2: log.level: must be one of 'trace', 'debug', 'info', 'warn', 'error', "
            "'critical', 'off', got 'verbose'"},
        bad_value{
            "[batcher]\npolicy = \"seed\"\nmax_batch_size = 32\n",
            "conveyor.toml:3: batcher.max_batch_size: must not exceed the slots of an automatic "
            "executor (16) under the seed policy, got 32"},
        bad_value{
            "[[executors]]\nslots = 16\n[[executors]]\nslots = 4\n[batcher]\npolicy = \"seed\"\n",
            "conveyor.toml:5: batcher.max_batch_size: must not exceed the slots of "
            "executors[1].slots (4) under the seed policy, got 16"}));

// Every integer key has an upper bound: nothing is narrowed (int64 to int32) or overflows when it
// becomes milliseconds or nanoseconds. Refused with the key and the line.
INSTANTIATE_TEST_SUITE_P(
    upper_bounds, config_impossible,
    testing::Values(
        bad_value{"[[executors]]\nslots = 4294967296\n",
                  "conveyor.toml:2: executors[0].slots: must be at most 2147483647, got 4294967296"},
        bad_value{"[[executors]]\ncontext = 2147483648\n",
                  "conveyor.toml:2: executors[0].context: must be at most 2147483647, got "
                  "2147483648"},
        bad_value{"[[executors]]\nmax_batched_tokens = 4294967297\n",
                  "conveyor.toml:2: executors[0].max_batched_tokens: must be at most 2147483647, "
                  "got 4294967297"},
        bad_value{"[[executors]]\nthreads = 1025\n",
                  "conveyor.toml:2: executors[0].threads: must be at most 1024, got 1025"},
        bad_value{"[tokenizer]\nworkers = 100000\n",
                  "conveyor.toml:2: tokenizer.workers: must be at most 1024, got 100000"},
        bad_value{"[batcher]\nmax_batch_size = 4294967296\n",
                  "conveyor.toml:2: batcher.max_batch_size: must be at most 2147483647, got "
                  "4294967296"},
        bad_value{"[batcher]\nmax_num_seqs = 4294967296\n",
                  "conveyor.toml:2: batcher.max_num_seqs: must be at most 2147483647, got "
                  "4294967296"},
        bad_value{"[batcher]\nmax_batched_tokens = 4294967296\n",
                  "conveyor.toml:2: batcher.max_batched_tokens: must be at most 2147483647, got "
                  "4294967296"},
        bad_value{"[batcher]\nmax_wait_ms = 9223372036854775807\n",
                  "conveyor.toml:2: batcher.max_wait_ms: must be at most 31536000000, got "
                  "9223372036854775807"},
        bad_value{"[batcher]\ndefault_timeout_s = 10000000000\n",
                  "conveyor.toml:2: batcher.default_timeout_s: must be at most 31536000, got "
                  "10000000000"},
        bad_value{"[generation]\nmax_tokens = 4294967296\n",
                  "conveyor.toml:2: generation.max_tokens: must be at most 2147483647, got "
                  "4294967296"},
        bad_value{"[generation]\ntop_k = 2147483648\n",
                  "conveyor.toml:2: generation.top_k: must be at most 2147483647, got 2147483648"},
        bad_value{"[metrics]\ninterval_s = 9223372036854775807\n",
                  "conveyor.toml:2: metrics.interval_s: must be at most 31536000, got "
                  "9223372036854775807"},
        bad_value{"[server]\nmax_header_bytes = 4294967296\n",
                  "conveyor.toml:2: server.max_header_bytes: must be at most 4294967295, got "
                  "4294967296"},
        bad_value{"[server]\nidle_timeout_s = 9223372036854775807\n",
                  "conveyor.toml:2: server.idle_timeout_s: must be at most 31536000, got "
                  "9223372036854775807"},
        bad_value{"[server]\ndrain_timeout_s = 9223372036854775807\n",
                  "conveyor.toml:2: server.drain_timeout_s: must be at most 31536000, got "
                  "9223372036854775807"},
        bad_value{"[server]\nio_threads = 2147483648\n",
                  "conveyor.toml:2: server.io_threads: must be at most 1024, got 2147483648"},
        bad_value{"[server]\nmax_stream_buffer_bytes = 0\n",
                  "conveyor.toml:2: server.max_stream_buffer_bytes: must be at least 1, got 0"},
        bad_value{"[server]\nstream_interval = 0\n",
                  "conveyor.toml:2: server.stream_interval: must be at least 1, got 0"},
        bad_value{"[server]\nstream_delay_ms = -1\n",
                  "conveyor.toml:2: server.stream_delay_ms: must be at least 0, got -1"},
        bad_value{"[server]\nstream_delay_ms = 1001\n",
                  "conveyor.toml:2: server.stream_delay_ms: must be at most 1000, got 1001"},
        bad_value{"[server]\nmax_n = 0\n",
                  "conveyor.toml:2: server.max_n: must be at least 1, got 0"},
        bad_value{"[server]\nmax_n = 1025\n",
                  "conveyor.toml:2: server.max_n: must be at most 1024, got 1025"},
        bad_value{"[server]\nmax_prompts = 0\n",
                  "conveyor.toml:2: server.max_prompts: must be at least 1, got 0"},
        bad_value{"[server]\nmax_prompts = 4294967296\n",
                  "conveyor.toml:2: server.max_prompts: must be at most 2147483647, got "
                  "4294967296"}));

// [generation] obeys the limits of a request's own fields, checked once at start: a default that
// every request omitting the field would carry is refused here, naming the key.
INSTANTIATE_TEST_SUITE_P(
    sampling_limits, config_impossible,
    testing::Values(
        bad_value{"[generation]\ntemperature = 2.5\n",
                  "conveyor.toml:2: generation.temperature: must be at most 2, got 2.5"},
        bad_value{"\n[generation]\ntop_p = 1.0000001\n",
                  "conveyor.toml:3: generation.top_p: must be at most 1, got 1.0000001"}));

TEST(config_limits, the_largest_allowed_values_load) {
  auto x = load_ok(
      "[[executors]]\nslots = 2147483647\nthreads = 1024\n[batcher]\n"
      "default_timeout_s = 31536000\nmax_wait_ms = 31536000000\n[generation]\ntemperature = 2\n"
      "[server]\nidle_timeout_s = 31536000\ndrain_timeout_s = 31536000\nmax_prompts = 7\n"
      "max_stream_buffer_bytes = 4096\n");
  ASSERT_EQ(x.executors.size(), 1u);
  EXPECT_EQ(x.executors[0].slots, 2147483647);
  EXPECT_EQ(x.batcher.default_timeout_s, 31536000);
  EXPECT_EQ(x.generation.temperature, 2.0);
  EXPECT_EQ(x.server.max_prompts, 7);
  EXPECT_EQ(x.server.max_stream_buffer_bytes, 4096);
}

TEST(config_limits, overrides_obey_the_same_bounds) {
  pipeline x;
  EXPECT_EQ(override_error(x, "executors", "cpu"), "");
  EXPECT_EQ(override_error(x, "executors[0].slots", "4294967296"),
            "command line: executors[0].slots: must be at most 2147483647, got 4294967296");
  EXPECT_EQ(override_error(x, "generation.temperature", "2.5"),
            "command line: generation.temperature: must be at most 2, got 2.5");
  EXPECT_EQ(override_error(x, "server.drain_timeout_s", "9223372036854775807"),
            "command line: server.drain_timeout_s: must be at most 31536000, got "
            "9223372036854775807");
  EXPECT_EQ(override_error(x, "server.max_prompts", "8"), "");
  EXPECT_EQ(x.server.max_prompts, 8);
}

TEST(config_errors, every_problem_is_reported_in_line_order) {
  EXPECT_EQ(load_error("[server]\nport = 70000\nhots = \"x\"\n\n[batcher]\nmax_batch_size = 0\n"),
            "conveyor.toml:2: server.port: must be at most 65535, got 70000\n"
            "conveyor.toml:3: unknown key 'server.hots'; did you mean 'server.host'?\n"
            "conveyor.toml:6: batcher.max_batch_size: must be at least 1, got 0");
}

// -- syntax errors and files
// -----------------------------------------------------------------------

TEST(config_errors, syntax_error_names_line_and_column) {
  auto msg = load_error("[server]\nport = 8080\nhost = \"127.0.0.1\n");
  EXPECT_EQ(msg.substr(0, msg.find(": syntax error: ")), "conveyor.toml:3:18") << msg;
  EXPECT_NE(msg.find(": syntax error: "), std::string::npos) << msg;
  msg = load_error("[server]\nport = = 1\n");
  EXPECT_EQ(msg.substr(0, msg.find(": syntax error: ")), "conveyor.toml:2:8") << msg;
  msg = load_error("[server]\nport = 1\nport = 2\n");
  EXPECT_EQ(msg,
            "conveyor.toml:3:8: syntax error: Error while parsing key-value pair: cannot "
            "redefine existing integer 'port'");
}

TEST(config_errors, missing_file_is_named) {
  auto result = load_file("no/such/conveyor.toml");
  ASSERT_FALSE(result);
  EXPECT_EQ(code_of(result.error()), ec::bad_file);
  EXPECT_EQ(message_of(result.error()), "no/such/conveyor.toml: no such file");
  result = load_file(source_dir + "/config");
  ASSERT_FALSE(result);
  EXPECT_EQ(message_of(result.error()), source_dir + "/config: not a regular file");
}

TEST(config_errors, errors_in_a_file_name_the_file) {
  auto path = testing::TempDir() + "conveyor_config_test.toml";
  {
    std::ofstream out{path};
    out << "[batcher]\nmax_batch_size = 0\n";
  }
  auto result = load_file(path);
  ASSERT_FALSE(result);
  EXPECT_EQ(message_of(result.error()),
            path + ":2: batcher.max_batch_size: must be at least 1, got 0");
  std::remove(path.c_str());
}

// -- validate
// --------------------------------------------------------------------------------------

TEST(config_validate, lists_every_problem_by_key) {
  pipeline x;
  x.server.port = 65536;
  x.batcher.max_batch_size = 0;
  x.executors = {executor{}};
  x.executors[0].device = "tpu";
  x.executors[0].slots = 0;
  auto err = validate(x);
  EXPECT_EQ(code_of(err), ec::bad_config);
  EXPECT_EQ(message_of(err),
            "executors[0].device: must be 'cpu', 'cuda' or 'cuda:N', got 'tpu'\n"
            "executors[0].slots: must be at least 1, got 0\n"
            "batcher.max_batch_size: must be at least 1, got 0\n"
            "server.port: must be at most 65535, got 65536\n"
            "executors: lists 1 executor(s) while auto_executors is set");
}

TEST(config_validate, accepts_every_device_form) {
  pipeline x;
  x.auto_executors = false;
  x.executors.resize(3);
  x.executors[0].device = "cpu";
  x.executors[1].device = "cuda";
  x.executors[2].device = "cuda:12";
  EXPECT_EQ(message_of(validate(x)), "");
}

// -- overrides
// -------------------------------------------------------------------------------------

TEST(config_override, sets_values_of_every_type) {
  pipeline x;
  EXPECT_EQ(override_error(x, "server.port", "8081"), "");
  EXPECT_EQ(override_error(x, "batcher.policy", "seed"), "");
  EXPECT_EQ(override_error(x, "generation.temperature", "0.5"), "");
  EXPECT_EQ(override_error(x, "generation.top_p", "1"), "");
  EXPECT_EQ(override_error(x, "metrics.enabled", "false"), "");
  EXPECT_EQ(override_error(x, "model.name", ""), "");
  EXPECT_EQ(override_error(x, "cluster.remote", "gpu1:7000, gpu2:7000"), "");
  EXPECT_EQ(x.server.port, 8081);
  EXPECT_EQ(x.batcher.policy, "seed");
  EXPECT_EQ(x.generation.temperature, 0.5);
  EXPECT_EQ(x.generation.top_p, 1.0);
  EXPECT_FALSE(x.metrics.enabled);
  EXPECT_EQ(x.cluster.remote, (std::vector<std::string>{"gpu1:7000", "gpu2:7000"}));
  EXPECT_EQ(override_error(x, "cluster.remote", ""), "");
  EXPECT_TRUE(x.cluster.remote.empty());
}

TEST(config_override, sets_executors) {
  pipeline x;
  EXPECT_EQ(override_error(x, "executors", "cpu,cuda:0"), "");
  EXPECT_FALSE(x.auto_executors);
  ASSERT_EQ(x.executors.size(), 2u);
  EXPECT_EQ(x.executors[1].device, "cuda:0");
  EXPECT_EQ(override_error(x, "executors[1].slots", "8"), "");
  EXPECT_EQ(override_error(x, "executors.0.threads", "4"), "");
  EXPECT_EQ(x.executors[1].slots, 8);
  EXPECT_EQ(x.executors[0].threads, 4);
  EXPECT_EQ(override_error(x, "executors", "auto"), "");
  EXPECT_EQ(x, pipeline{});
}

TEST(config_override, refuses_bad_keys_and_values_and_leaves_the_value) {
  pipeline x;
  EXPECT_EQ(override_error(x, "server.prot", "8081"),
            "command line: unknown key 'server.prot'; did you mean 'server.port'?");
  EXPECT_EQ(override_error(x, "sever.port", "8081"),
            "command line: unknown key 'sever.port'; did you mean 'server.port'?");
  EXPECT_EQ(override_error(x, "server", "8081"), "command line: unknown key 'server'");
  EXPECT_EQ(override_error(x, "server.port", "80a"),
            "command line: server.port: expected an integer, got '80a'");
  EXPECT_EQ(override_error(x, "server.port", "70000"),
            "command line: server.port: must be at most 65535, got 70000");
  EXPECT_EQ(override_error(x, "batcher.max_batch_size", "0"),
            "command line: batcher.max_batch_size: must be at least 1, got 0");
  EXPECT_EQ(override_error(x, "batcher.policy", "fifo"),
            "command line: batcher.policy: must be one of 'sequential', 'seed', 'continuous', got "
            "'fifo'");
  EXPECT_EQ(override_error(x, "generation.temperature", "warm"),
            "command line: generation.temperature: expected a number, got 'warm'");
  EXPECT_EQ(override_error(x, "metrics.enabled", "yes"),
            "command line: metrics.enabled: expected true or false, got 'yes'");
  EXPECT_EQ(override_error(x, "cluster.remote", "a:1,b"),
            "command line: cluster.remote[1]: must be 'host:port' with a port from 1 to 65535, got "
            "'b'");
  EXPECT_EQ(override_error(x, "executors", "cpu,gpu"),
            "command line: executors[1].device: must be 'cpu', 'cuda' or 'cuda:N', got 'gpu'");
  EXPECT_EQ(override_error(x, "executors[0].slots", "8"),
            "command line: executors[0].slots: no such executor, executors is \"auto\"");
  EXPECT_EQ(override_error(x, "executors", "cpu"), "");
  EXPECT_EQ(override_error(x, "executors[1].slots", "8"),
            "command line: executors[1].slots: no such executor, the configuration lists 1");
  EXPECT_EQ(override_error(x, "executors[0].slot", "8"),
            "command line: unknown key 'executors[0].slot'; did you mean 'executors[0].slots'?");
  EXPECT_EQ(override_error(x, "executors[0].slots", "0"),
            "command line: executors[0].slots: must be at least 1, got 0");
  // Nothing above changed a value.
  pipeline expected;
  expected.auto_executors = false;
  expected.executors = {executor{}};
  EXPECT_EQ(x, expected);
}

TEST(config_override, errors_are_bad_config) {
  pipeline x;
  EXPECT_EQ(code_of(apply_override(x, "server.port", "x")), ec::bad_config);
}

// -- round trip
// ------------------------------------------------------------------------------------

TEST(config_to_toml, renders_the_defaults_in_file_order) {
  EXPECT_EQ(to_toml(pipeline{}), R"(# Conveyor: the effective configuration.
executors = "auto"

[model]
path = "models/stories260K/stories260K.bin"
tokenizer = ""
name = ""
seed = 0
chat_template = ""
tool_call_parser = ""
dtype = "auto"
kv_cache_dtype = "auto"
bf16_inputs = true

[tokenizer]
workers = 2

[kv_cache]
block_size = 16
memory_mb = 0
prefix_caching = true

[structured_outputs]
compile_timeout_ms = 10000
max_compiling = 4
max_spec_kb = 256
cache_mb = 256

[cluster]
remote = []

[batcher]
policy = "continuous"
max_batch_size = 16
max_wait_ms = 5
max_num_seqs = 16
max_batched_tokens = 2048
max_queued_requests = 1024
max_queued_tokens = 1048576
default_timeout_s = 0

[generation]
max_tokens = 16
temperature = 1.0
top_p = 1.0
top_k = 0

[metrics]
enabled = true
interval_s = 10

[server]
host = "127.0.0.1"
port = 8080
max_body_bytes = 1048576
max_header_bytes = 16384
idle_timeout_s = 60
header_timeout_s = 10
max_connections = 1024
max_connections_per_address = 256
drain_timeout_s = 10
io_threads = 1
max_stream_buffer_bytes = 1048576
stream_interval = 16
stream_delay_ms = 2
max_prompts = 64
max_n = 16

[log]
level = "info"
)");
}

TEST(config_to_toml, round_trips_the_defaults) {
  EXPECT_EQ(load_ok(to_toml(pipeline{})), pipeline{});
}

TEST(config_to_toml, round_trips_every_changed_value) {
  pipeline x;
  x.model.path = "C:\\models\\\"odd\" name\t.bin";
  x.model.tokenizer = "tok\u00e9.model";
  x.model.name = "line\nbreak";
  x.model.seed = 9007199254740993;
  x.tokenizer.workers = 3;
  x.auto_executors = false;
  x.executors.resize(2);
  x.executors[0].device = "cuda:0";
  x.executors[0].threads = 1;
  x.executors[1].slots = 3;
  x.executors[1].context = 128;
  x.executors[1].max_batched_tokens = 99;
  x.cluster.remote = {"a:1", "[::1]:7000"};
  x.batcher.policy = "sequential";
  x.batcher.max_queued_tokens = 5;
  x.generation.temperature = 0.1;
  x.generation.top_p = 1e-7;
  x.generation.top_k = 50;
  x.metrics.enabled = false;
  x.server.host = "::";
  x.server.port = 0;
  x.server.stream_delay_ms = 7;
  x.log.level = "off";
  auto text = to_toml(x);
  auto back = load_string(text, "printed.toml");
  ASSERT_TRUE(back) << message_of(back.error()) << "\n" << text;
  EXPECT_EQ(*back, x);
  EXPECT_NE(text.find("[[executors]]\ndevice = \"cuda:0\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("temperature = 0.1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("executors = "), std::string::npos) << text;
}

TEST(config_to_toml, equality_sees_every_key) {
  pipeline x;
  pipeline y;
  EXPECT_EQ(x, y);
  y.log.level = "warn";
  EXPECT_NE(x, y);
  y = x;
  y.executors = {executor{}};
  EXPECT_NE(x, y);
  y = x;
  y.auto_executors = false;
  EXPECT_NE(x, y);
}

// -- derived values
// --------------------------------------------------------------------------------

TEST(config_derived, served_name_and_tokenizer_path) {
  config::model m;
  EXPECT_EQ(served_name(m), "stories260K");
  // A model directory: its folder name, dots and a trailing slash kept out of the way.
  m.path = "/models/TinyLlama-1.1B/";
  EXPECT_EQ(served_name(m), "TinyLlama-1.1B");
  m.path = std::string{CONVEYOR_SOURCE_DIR} + "/tests/fixtures/hf_models/qwen2";
  EXPECT_EQ(served_name(m), "qwen2");
  EXPECT_EQ(tokenizer_path(m), "models/stories260K/tok512.model");
  m.path = "synthetic:s42m";
  EXPECT_EQ(served_name(m), "s42m");
  m.path = "trivial";
  EXPECT_EQ(served_name(m), "trivial");
  m.name = "story-teller";
  m.tokenizer = "other.model";
  EXPECT_EQ(served_name(m), "story-teller");
  EXPECT_EQ(tokenizer_path(m), "other.model");
}

}  // namespace

}  // namespace conveyor::config
