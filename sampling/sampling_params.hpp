// The sampling and stopping fields of one request: the one struct that travels from the HTTP
// server's parser through the pipeline (and over the wire to remote executors) to the sampler
// and the logit processor. Their defaults and limits: common/sampling.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/sampling.hpp"
#include "sampling/structured_output.hpp"

namespace conveyor::sampling {

/// One entry of a request's `logit_bias`: `bias` is added to the logit of token `id`.
struct token_bias {
  int32_t id = 0;
  /// In [-100, 100] (OpenAI's range); -100 keeps the token out in practice.
  float bias = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_bias& x) {
  return f(x.id, x.bias);
}

/// How one request samples its tokens and when it stops. A field a client leaves out holds the
/// server's default (`completion_backend::defaults()`); the limits of each field are
/// conveyor::sampling_limits, checked by the server for a client's fields and by
/// pipeline::check_request for callers that embed the pipeline.
struct sampling_params {
  /// Most tokens to generate. With `echo` it may be 0, which only prefills the prompt.
  int32_t max_tokens = sampling_defaults{}.max_tokens;
  /// 0 means greedy (argmax); otherwise logits are divided by it before the softmax.
  float temperature = sampling_defaults{}.temperature;
  /// Nucleus sampling: keep the smallest set of tokens whose probability reaches top_p (1 = all).
  float top_p = sampling_defaults{}.top_p;
  /// Keep only the top_k most likely tokens (0 = all).
  int32_t top_k = sampling_defaults{}.top_k;
  /// Seed of this request's generator: the same seed gives the same tokens, whatever else
  /// shares the batch. Absent means any: the backend draws one as the request enters the
  /// pipeline (so that a request run again samples the same); a sampler given none uses 0.
  std::optional<uint64_t> seed;
  /// Stop strings (none empty); generation ends before the first one that appears.
  std::vector<std::string> stop;
  /// Generate until max_tokens, whatever end tokens the model produces (benchmarks on random
  /// weights do); stop_token_ids still end it.
  bool ignore_eos = false;
  // -- log-probabilities and echo --
  /// Report each sampled token's log-probability with this many alternatives (0..20); -1: none.
  int32_t logprobs = -1;
  /// Also report the prompt tokens' log-probabilities under the raw model (with `logprobs`
  /// alternatives each, at least 0); the first token has none (NaN).
  bool prompt_logprobs = false;
  /// The client gets the prompt back (echo): max_tokens may then be 0, a prefill alone.
  bool echo = false;
  // -- logit processing (sampling/logit_processor.hpp): penalties, bias, min_tokens, stop ids --
  /// OpenAI's: subtracted once from the logit of every token generated so far, in [-2, 2].
  float presence_penalty = 0;
  /// OpenAI's: subtracted per occurrence among the generated tokens, in [-2, 2].
  float frequency_penalty = 0;
  /// vLLM's and transformers' multiplicative penalty over prompt and generated tokens, in (0, 2]:
  /// a positive logit is divided by it, a negative one multiplied; 1 is off.
  float repetition_penalty = 1;
  /// Added to the logits of these tokens before sampling; ids within the vocabulary (ids outside
  /// a row of logits are skipped).
  std::vector<token_bias> logit_bias;
  /// Until this many tokens are generated, end tokens and stop_token_ids cannot be sampled and
  /// stop strings do not end the sequence; at most max_tokens.
  int32_t min_tokens = 0;
  /// Generating one of these ends the sequence with "stop" (its text is not output), even with
  /// ignore_eos.
  std::vector<int32_t> stop_token_ids;
  // -- structured outputs --
  /// The format the output must have; the sampler masks every token that would leave it, and
  /// the sequence ends ("stop") when the format is complete and allows nothing more.
  structured_output constraint;
};

namespace detail {

/// An optional seed as an inspector sees it: a flag and a value (CAF 0.17 inspects no
/// std::optional).
struct optional_seed {
  std::optional<uint64_t>& seed;

  template <class Inspector>
  friend typename Inspector::result_type inspect(Inspector& f, optional_seed& x) {
    bool set = x.seed.has_value();
    uint64_t value = x.seed.value_or(0);
    if constexpr (Inspector::writes_state) {
      // Stores what was read once the inspector is done with the two fields.
      struct store {
        optional_seed& x;
        const bool& set;
        const uint64_t& value;
        ~store() { x.seed = set ? std::optional<uint64_t>{value} : std::nullopt; }
      } on_return{x, set, value};
      return f(set, value);
    } else {
      return f(set, value);
    }
  }
};

}  // namespace detail

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sampling_params& x) {
  detail::optional_seed seed{x.seed};
  return f(x.max_tokens, x.temperature, x.top_p, x.top_k, seed, x.stop, x.ignore_eos, x.logprobs,
           x.prompt_logprobs, x.echo, x.presence_penalty, x.frequency_penalty, x.repetition_penalty,
           x.logit_bias, x.min_tokens, x.stop_token_ids, x.constraint);
}

}  // namespace conveyor::sampling
