// The model interface the executor drives: prefill and decode over a KV cache reserved once.
// Torch-free: pipeline/ and actors/ include this header, never a torch header.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/checkpoint.hpp"

namespace conveyor::model {

/// Which implementation computes a Llama network.
enum class llama_network {
  /// Plain loops on "cpu", torch operations on a GPU.
  automatic,
  /// Plain loops between matrix products: the fast network of the CPU ("cpu" only).
  loops,
  /// Torch operations: the network of every device, "cpu" included.
  torch_ops,
};

/// The number format the network computes in.
enum class compute_dtype {
  /// float32: the exact reference.
  f32,
  /// bfloat16: in the torch-operation network weights, activations and KV cache; in the CPU's
  /// plain loops the weights (and, by default, the KV cache) with float32 activations and sums.
  /// Logits are returned as float32.
  bf16,
};

/// The name of a dtype as the configuration writes it: "f32" or "bf16".
const char* dtype_name(compute_dtype dtype);

/// How a model instance is laid out in memory.
struct runtime_options {
  /// The most sequences in one forward pass (and, in the executor, in flight at once).
  int32_t slots = 16;
  /// The longest sequence, prompt and generated tokens together; 0 means the model's own
  /// seq_len.
  int32_t context = 0;
  /// Positions per block of the KV cache: a power of two from 8 to 1024.
  int32_t block_size = 16;
  /// Blocks of the KV cache, reserved at construction and shared by every sequence through its
  /// block table; 0 means what `slots` sequences of `context` tokens take
  /// (`default_kv_blocks`).
  int32_t kv_blocks = 0;
  /// The most tokens one forward pass processes; larger prefills are split into several passes.
  int32_t max_batched_tokens = 2048;
  /// "cpu", "cuda" or "cuda:N".
  std::string device = "cpu";
  /// Seed of synthetic weights.
  uint64_t seed = 0;
  /// Which implementation computes the network.
  llama_network network = llama_network::automatic;
  /// Capture the decode step of each batch-size bucket as a CUDA graph (on a GPU, in a build
  /// with CONVEYOR_CUDA_GRAPHS).
  bool cuda_graphs = true;
  /// The number format of the weights (and in the torch-operation network of the activations),
  /// and of the KV cache unless `kv_dtype` says otherwise.
  compute_dtype dtype = compute_dtype::f32;
  /// The number format of the KV cache; unset means `dtype` (`kv_dtype_of`). Only the plain-loop
  /// network (the CPU's) keeps a cache in another format than `dtype`; the torch-operation
  /// network refuses one.
  std::optional<compute_dtype> kv_dtype;
  /// With `dtype` bf16 in the plain-loop network: the matrix products' inputs are rounded to
  /// bfloat16 too (weight_format::bf16_dot). The torch-operation network computes in bf16
  /// throughout with `dtype` bf16 and ignores it.
  bool bf16_inputs = false;
  /// In the plain-loop network: quantize the matrices a file keeps in floats to this ggml type
  /// as they are read ("q8_0" or "q4_0"; empty: none). Matrices a file keeps quantized (GGUF)
  /// are multiplied in their own type whatever this says.
  std::string quantize;
};

/// The number format the KV cache of `options` is kept in: `kv_dtype`, or `dtype` when unset.
inline compute_dtype kv_dtype_of(const runtime_options& options) {
  return options.kv_dtype.value_or(options.dtype);
}

/// One sequence's part of a prefill: `count` tokens from position `start`, their keys and values
/// written into the sequence's blocks. `blocks` is the sequence's block table: entry i is the
/// cache block of positions [i * block_size, (i + 1) * block_size), with at least
/// ceil((start + count) / block_size) entries. Attention reads positions 0..start + i of the
/// table's blocks (those before `start` written earlier, by this sequence or by any other whose
/// blocks it shares).
struct prefill_item {
  const int32_t* blocks = nullptr;
  int32_t start = 0;
  const int32_t* tokens = nullptr;
  int32_t count = 0;
  /// Which of the `count` tokens gives the returned logits; -1 means the last. A right-padded
  /// prompt (padding after the real tokens) asks for its last real token.
  int32_t logits_at = -1;
  /// Return the logits of every one of the `count` tokens, in order (`count` rows instead of
  /// one; `logits_at` is then ignored): what the log-probabilities of a prompt need.
  bool all_logits = false;
};

/// One sequence's part of a decode step: `token` at `position`, through its block table `blocks`
/// (as prefill_item's, at least ceil((position + 1) / block_size) entries).
struct decode_item {
  const int32_t* blocks = nullptr;
  int32_t position = 0;
  int32_t token = 0;
};

/// Logits rows owned by the model, valid until its next prefill or decode.
struct logits_view {
  const float* data = nullptr;
  int32_t rows = 0;
  int32_t vocab = 0;
  const float* row(int32_t i) const { return data + static_cast<int64_t>(i) * vocab; }
};

/// A causal language model with a KV cache of `kv_blocks()` blocks of `block_size()` positions,
/// reserved at construction, that sequences share through their block tables. Every position's
/// keys and values, and every row's logits, depend only on the sequence's tokens: not on which
/// blocks hold them, nor on the other sequences of the pass, nor on how its prompt was split
/// into passes (on the CPU bit for bit; on a GPU within its numerics). Not thread-safe: one
/// owner (an executor thread) calls it.
class causal_lm {
 public:
  virtual ~causal_lm() = default;

  /// The network's shape.
  virtual const llama_shape& shape() const = 0;

  /// The most sequences in one forward pass.
  virtual int32_t slots() const = 0;

  /// The longest sequence (prompt and generated tokens together).
  virtual int32_t context() const = 0;

  /// Positions per KV-cache block.
  virtual int32_t block_size() const = 0;

  /// KV-cache blocks reserved.
  virtual int32_t kv_blocks() const = 0;

  /// True when the model has no real end token (random weights): generation ignores EOS/BOS.
  virtual bool ignores_end_tokens() const = 0;

  /// Runs the prompts of `items` and returns one logits row per item, in order (`count` rows for
  /// an item with `all_logits`). No two items write the same block.
  virtual logits_view prefill(const std::vector<prefill_item>& items) = 0;

  /// Runs one token for each item and returns one logits row per item. No two items write the
  /// same block.
  virtual logits_view decode(const std::vector<decode_item>& items) = 0;

  /// A one-line description: shape, device, slots, context, KV-cache blocks and bytes.
  virtual std::string describe() const = 0;

  /// Copies the keys and values of every position of block `from` into block `to` (distinct),
  /// every layer: a sequence that shares another's last, partly filled block continues in a copy
  /// of its own.
  virtual void copy_block(int32_t from, int32_t to) = 0;

  /// Bytes of KV cache reserved.
  virtual int64_t kv_cache_bytes() const = 0;

  /// The ids that end a sequence (generation_config.json's eos_token_id); empty means the
  /// tokenizer's BOS and EOS, as llama2.c's run.c stops.
  virtual const std::vector<int32_t>& end_ids() const {
    static const std::vector<int32_t> none;
    return none;
  }
};

class llama_source;

/// Builds the Llama network of `options.device` from weights.
expected<std::unique_ptr<causal_lm>> make_llama(const llama_weights& weights,
                                                const runtime_options& options);

/// Builds the Llama network from a weight source (model/llama_source.hpp), tensor by tensor.
expected<std::unique_ptr<causal_lm>> make_llama(const llama_source& source,
                                                const runtime_options& options);

/// A model that does no arithmetic: fixed logits that always pick token `(position*7+3) % vocab`
/// so that output is deterministic. For measuring the pipeline's own cost.
std::unique_ptr<causal_lm> make_trivial_model(const runtime_options& options);

/// Loads a model by spec: a Hugging Face model directory, a llama2.c checkpoint path,
/// "synthetic:NAME" or "trivial". Where `summary` is given, a directory's load writes a line for
/// the start-up log there (parameters, bytes and dtype of the files, load time).
expected<std::unique_ptr<causal_lm>> load_model(const std::string& spec,
                                                const runtime_options& options,
                                                std::string* summary = nullptr);

/// Loads a Hugging Face model directory (config.json, model.safetensors or its sharded index,
/// generation_config.json); `summary` as for load_model.
expected<std::unique_ptr<causal_lm>> load_hf_model(const std::string& dir,
                                                   const runtime_options& options,
                                                   std::string* summary = nullptr);

/// Bytes the KV cache of `shape` needs for `sequences` x `tokens` positions in `dtype` (a block:
/// one sequence of block_size tokens).
int64_t kv_cache_bytes(const llama_shape& shape, int32_t sequences, int32_t tokens,
                       compute_dtype dtype = compute_dtype::f32);

/// The blocks of `block_size` positions that `slots` sequences of `context` tokens take: what a
/// KV cache of `runtime_options::kv_blocks` 0 reserves.
int32_t default_kv_blocks(int32_t slots, int32_t context, int32_t block_size);

/// The blocks of `block_size` positions that `bytes` of KV cache hold.
int32_t kv_blocks_in(const llama_shape& shape, int64_t bytes, int32_t block_size,
                     compute_dtype dtype);

/// Bytes of one number in `dtype`.
int64_t bytes_per_element(compute_dtype dtype);

/// Resolves a model or tokenizer path with `resolve_data_path` (common/install_dirs.hpp): as given
/// when it exists relative to the working directory, else under the installed data folder (so
/// that the default "models/stories260K/..." works from any directory). Specs such as
/// "synthetic:s15m" and "trivial" are returned unchanged.
std::string resolve_path(const std::string& path);

/// The shape a model spec will have, read without loading the weights.
expected<llama_shape> shape_of(const std::string& spec);

/// The tokenizer to use with a model spec when none is given: DIR/tokenizer.json for a model
/// directory, tok512.model beside a checkpoint when present, else the default tokenizer
/// (`default_tokenizer_path`, resolved like `resolve_path`).
std::string default_tokenizer_for(const std::string& model_spec);

/// Sets the number of threads the CPU network (kernels/work_pool.hpp), torch and the BLAS use in
/// this process.
void set_compute_threads(int32_t threads);

/// The compute threads of a CPU executor whose configuration leaves them to the machine (0):
/// `cores`, or one when no weight product of a decode step of `shape` at `max_batch` sequences
/// is large enough to wake a worker of the pool (`packed_matrix::wakes_pool`): for so small a
/// model a second thread mostly polls for work, taking a core from the server's I/O and the
/// client (docs/benchmarks.md).
int32_t auto_compute_threads(const llama_shape& shape, int32_t max_batch, int32_t cores);

/// A line saying which BLAS library is loaded and how many threads it and torch use.
std::string compute_backend_description();

}  // namespace conveyor::model
