// The configuration schema: one TOML file describes the whole pipeline, every key has a default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "common/install_dirs.hpp"
#include "common/sampling.hpp"

namespace conveyor::config {

// -- constants
// -------------------------------------------------------------------------------------

// The default model and its tokenizer are `conveyor::default_model_path` and
// `conveyor::default_tokenizer_path` (common/install_dirs.hpp): relative paths, found in the
// working directory or else in the installed data folder.

// -- sections
// --------------------------------------------------------------------------------------

/// `[model]`: what to serve.
struct model {
  /// A Hugging Face model directory (config.json, safetensors, tokenizer.json), a llama2.c
  /// checkpoint file, or "synthetic:s15m" / "synthetic:s42m" (random weights of that size), or
  /// "trivial" (a model that does no work).
  std::string path = std::string{default_model_path};
  /// The tokenizer model; empty selects `default_tokenizer_path`.
  std::string tokenizer;
  /// The model name clients see; empty derives it from `path` (see `served_name`).
  std::string name;
  /// The seed of synthetic weights.
  int64_t seed = 0;
  /// The chat template of /v1/chat/completions: inline Jinja text when it contains "{{" or
  /// "{%", else the path of a file holding it; empty uses the model's own (chat_template.jinja
  /// or tokenizer_config.json's "chat_template" beside its tokenizer); a model without one then
  /// gets chat refused (400).
  std::string chat_template;
  /// The parser of the model's tool calls, which reads its answers to chat requests with
  /// tools and tool_choice "auto": "hermes" (Hermes, Qwen2.5: `<tool_call>` blocks) or
  /// "llama3_json" (Llama 3.x: JSON objects); empty refuses tool_choice "auto" (400), as vLLM
  /// needs --tool-call-parser.
  std::string tool_call_parser;
  /// The number format executors compute in: "auto" (bf16 when the weights are stored in bf16,
  /// on a GPU also f16; else f32), "f32" or "bf16"; on a CPU also "q8_0" or "q4_0": float
  /// weights quantized as they load (activations f32).
  std::string dtype = "auto";
  /// The number format of the KV cache: "auto" (as `dtype` resolves), "f32" or "bf16". Only
  /// the CPU's plain-loop network keeps a cache in another format than `dtype`.
  std::string kv_cache_dtype = "auto";
  /// With bf16 weights on a CPU that has AVX-512 BF16: the matrix products' inputs are rounded to
  /// bfloat16 too, for its dot product instruction (twice the products per instruction; sums
  /// stay float32). Off, the inputs stay float32, as they do without bf16 weights or the
  /// instruction; a GPU's bf16 computes in bf16 throughout anyway.
  bool bf16_inputs = true;
};

/// `[tokenizer]`: the pool of tokenizer actors.
struct tokenizer {
  /// Number of tokenizer actors.
  int64_t workers = 2;
};

/// `[kv_cache]`: how each executor keeps its KV cache.
struct kv_cache {
  /// Positions per block: a power of two from 8 to 1024.
  int64_t block_size = 16;
  /// MiB of KV cache per executor, reserved at start; 0 reserves what `slots` sequences of the
  /// whole `context` take. Sequences share it by need; at least one sequence of the whole
  /// context must fit.
  int64_t memory_mb = 0;
  /// Automatic prefix caching: full blocks are kept after their sequence ends (until their memory
  /// is needed, least recently used first) and a prompt starts from its longest cached prefix.
  bool prefix_caching = true;
};

/// `[structured_outputs]`: how requests' output formats (JSON schemas, regexes, choices,
/// grammars, tool calls) are compiled into token masks.
struct structured_outputs {
  /// How long a request waits for its format's compilation before it is refused (400).
  int64_t compile_timeout_ms = 10000;
  /// Compilations at once (those past their time limit included); one more is refused.
  int64_t max_compiling = 4;
  /// KiB of one schema, regex or grammar (or of a choice list's strings).
  int64_t max_spec_kb = 256;
  /// MiB of compiled formats kept for reuse, least recently used dropped first.
  int64_t cache_mb = 256;
};

/// One entry of `[[executors]]`: an actor that owns the model on one device.
struct executor {
  /// "cpu", "cuda" (the first GPU) or "cuda:N".
  std::string device = "cpu";
  /// Compute threads (CPU only); 0 leaves them to the machine: every core, shared among the
  /// executors, or one for a model too small to share a step (`model::auto_compute_threads`).
  int64_t threads = 0;
  /// KV-cache slots, i.e. the most sequences that run at once.
  int64_t slots = 16;
  /// Tokens of context per slot; 0 uses the model's own context length.
  int64_t context = 0;
  /// The most prompt tokens one step processes (the running sequences' tokens come on top).
  int64_t max_batched_tokens = 2048;
  /// continuous: each sequence, running or waiting for its prompt, is worth (ratio - 1) times the
  /// predicted time of a step's decode rows (costs learnt from the executor's own steps): a step
  /// with R rows decoding and W prompts waiting may take decode x (1 + (ratio - 1) x (R + W) / R);
  /// prompt tokens fill what is left.
  double step_target_ratio = 1.25;
  /// continuous: when above 0, the time in milliseconds a step that decodes may take, instead
  /// of `step_target_ratio`.
  double step_target_ms = 0;
  /// continuous: the fewest prompt tokens a step takes while prompts wait, whatever the target.
  int64_t min_prefill_tokens = 16;
};

/// `[cluster]`: executors on other machines.
struct cluster {
  /// "host:port" of each `conveyor worker` to pull work from this server's batcher.
  std::vector<std::string> remote;
};

/// `[batcher]`: admission policy and the bounds of the waiting queue.
struct batcher {
  /// "sequential", "seed" or "continuous".
  std::string policy = "continuous";
  /// seed: the most requests in one static batch.
  int64_t max_batch_size = 16;
  /// seed: a partial batch is flushed after waiting this long, in milliseconds.
  int64_t max_wait_ms = 5;
  /// continuous: the most sequences running at once per executor.
  int64_t max_num_seqs = 16;
  /// continuous: the most prompt tokens handed to one executor at a time (at least one request).
  int64_t max_batched_tokens = 2048;
  /// Requests waiting beyond this are rejected (queue full).
  int64_t max_queued_requests = 1024;
  /// Prompt tokens waiting beyond this are rejected (queue full).
  int64_t max_queued_tokens = 1048576;
  /// Deadline of a request that sets none, in seconds; 0 means no deadline. At most a year
  /// (`max_timeout_s`).
  int64_t default_timeout_s = 0;
};

/// `[generation]`: sampling defaults for requests that leave a field out. Defaults and limits are
/// those of conveyor::sampling_defaults and conveyor::sampling_limits.
struct generation {
  /// Tokens to generate.
  int64_t max_tokens = sampling_defaults{}.max_tokens;
  /// Softmax temperature; 0 is greedy.
  double temperature = sampling_defaults{}.temperature;
  /// Nucleus sampling mass, in (0, 1]; 1 disables it.
  double top_p = sampling_defaults{}.top_p;
  /// Sample among the k most likely tokens; 0 disables it.
  int64_t top_k = sampling_defaults{}.top_k;
};

/// `[metrics]`: timing collection and the periodic summary.
struct metrics {
  /// Collect timings at all.
  bool enabled = true;
  /// Period of the summary log line, in seconds; 0 disables it.
  int64_t interval_s = 10;
};

/// `[server]`: the HTTP front end. These member initialisers are also the defaults of
/// server::server_options.
struct server {
  /// Address to listen on.
  std::string host = "127.0.0.1";
  /// TCP port to listen on; 0 picks a free one.
  int64_t port = 8080;
  /// Largest accepted request body.
  int64_t max_body_bytes = 1048576;
  /// Largest accepted request header block.
  int64_t max_header_bytes = 16384;
  /// An idle connection is closed after this many seconds.
  int64_t idle_timeout_s = 60;
  /// The whole request line and headers must arrive within this many seconds (from the
  /// connection's start, or from the first byte of a later request); else 408 and close.
  int64_t header_timeout_s = 10;
  /// Connections beyond this are refused.
  int64_t max_connections = 1024;
  /// Connections from one client address beyond this are refused (429).
  int64_t max_connections_per_address = 256;
  /// On shutdown, running requests get this many seconds to finish.
  int64_t drain_timeout_s = 10;
  /// Threads that run the sockets.
  int64_t io_threads = 1;
  /// Bytes of a stream that may wait unsent for a slow client; beyond this its requests are
  /// cancelled and its connection is closed.
  int64_t max_stream_buffer_bytes = 1048576;
  /// The most events of a stream that wait to be written together: the one that makes this many
  /// goes at once with the others; 1 writes each step's events as they come.
  int64_t stream_interval = 16;
  /// The longest a stream event waits to be written with the following ones, in milliseconds;
  /// 0 writes each step's events as they come. Only a fast stream's events wait (ones coming
  /// less than half this apart); each choice's first event and the stream's end go at once.
  int64_t stream_delay_ms = 2;
  /// The most prompts in one completion request's prompt array.
  int64_t max_prompts = 64;
  /// The most choices (`n`) one completion request may ask for per prompt.
  int64_t max_n = 16;
};

/// `[log]`: diagnostics.
struct log {
  /// "trace", "debug", "info", "warn", "error", "critical" or "off".
  std::string level = "info";
};

// -- the whole file
// --------------------------------------------------------------------------------

/// Everything one TOML file configures. A default-constructed pipeline is the default
/// configuration (and what the shipped `config/conveyor.toml` describes).
struct pipeline {
  /// `[model]`.
  config::model model;
  /// `[tokenizer]`.
  config::tokenizer tokenizer;
  /// `[kv_cache]`.
  config::kv_cache kv_cache;
  /// `[structured_outputs]`.
  config::structured_outputs structured_outputs;
  /// `executors = "auto"`: one executor per visible GPU, else one CPU executor, each with the
  /// defaults of `executor`. When set, `executors` is empty.
  bool auto_executors = true;
  /// `[[executors]]`: the local executors, listed; used when `auto_executors` is false. May be
  /// empty (`executors = []`) when `cluster.remote` names workers that do all the work.
  std::vector<config::executor> executors;
  /// `[cluster]`.
  config::cluster cluster;
  /// `[batcher]`.
  config::batcher batcher;
  /// `[generation]`.
  config::generation generation;
  /// `[metrics]`.
  config::metrics metrics;
  /// `[server]`.
  config::server server;
  /// `[log]`.
  config::log log;
};

/// Compares every key.
bool operator==(const pipeline& x, const pipeline& y);

/// Compares every key.
inline bool operator!=(const pipeline& x, const pipeline& y) {
  return !(x == y);
}

// -- loading
// ---------------------------------------------------------------------------------------

/// Reads and validates a TOML file. Errors (`ec::bad_config`, or `ec::bad_file` when the file
/// cannot be read) name the file, the line and the dotted key, one problem per line, e.g.
/// `conveyor.toml:12: batcher.max_batch_size: must be at least 1, got 0`.
expected<pipeline> load_file(const std::string& path);

/// Parses and validates TOML text; `source_name` stands for the file in error messages.
expected<pipeline> load_string(std::string_view toml, std::string_view source_name);

/// Sets one key from the command line, e.g. ("server.port", "8081"), ("batcher.policy", "seed"),
/// ("executors[0].slots", "8"), ("executors", "auto"), ("executors", "cuda:0,cuda:1"),
/// ("executors", "none") (no local executor: valid only with cluster.remote) or
/// ("cluster.remote", "a:7000,b:7000"). The value is read according to the key's type and checked
/// like a value from a file; cross-field checks are left to `validate`. Errors start with
/// "command line: ".
error apply_override(pipeline& cfg, std::string_view dotted_key, std::string_view value);

/// Checks every value and the rules between values; returns all problems, one per line, each
/// as `dotted.key: problem`, or no error.
error validate(const pipeline& cfg);

/// Renders the configuration as TOML; `load_string` reads a valid configuration back to an equal
/// pipeline.
std::string to_toml(const pipeline& cfg);

/// Every key a file may hold, dotted, in the order of the shipped file: "model.path", ...,
/// "executors", then the keys of one executor as "executors[].device" and so on, ..., "log.level".
std::vector<std::string> keys();

// -- derived values
// --------------------------------------------------------------------------------

/// The name clients see: `name` when set, else the file stem of `path` ("stories260K"), the size
/// of a synthetic model ("s15m"), or "trivial".
std::string served_name(const config::model& cfg);

/// The tokenizer file: `tokenizer` when set, else `default_tokenizer_path`.
std::string tokenizer_path(const config::model& cfg);

/// The executors to spawn: the listed ones, or with `auto_executors` one per visible GPU
/// ("cuda:0", "cuda:1", ...) and else one CPU executor, each with the defaults of `executor`.
std::vector<executor> resolve_executors(const pipeline& cfg, size_t visible_gpus);

}  // namespace conveyor::config
