// The defaults and limits of a request's sampling fields (the fields themselves:
// sampling/sampling_params.hpp), in one place for the configuration, the pipeline, the sampler,
// `conveyor generate` and the HTTP server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

namespace conveyor {

/// What a request that leaves a sampling field out gets. These member initialisers are the one
/// source of the defaults: config::generation, sampling::sampling_params and the server's
/// completion_defaults take theirs from here.
struct sampling_defaults {
  /// Tokens to generate (OpenAI's default).
  int32_t max_tokens = 16;
  /// Softmax temperature; 0 is greedy.
  float temperature = 1.0f;
  /// Nucleus sampling mass, in (0, 1]; 1 disables it.
  float top_p = 1.0f;
  /// Sample among the k most likely tokens; 0 disables it.
  int32_t top_k = 0;
};

/// The limits of the sampling fields: checked once at start for the configuration
/// (`[generation]`) and per request for the fields a client or caller sets.
struct sampling_limits {
  /// max_tokens in [1, 2^31 - 1].
  static constexpr int64_t min_max_tokens = 1;
  static constexpr int64_t max_max_tokens = std::numeric_limits<int32_t>::max();
  /// temperature in [0, 2] (OpenAI's range).
  static constexpr double min_temperature = 0.0;
  static constexpr double max_temperature = 2.0;
  /// top_p in (0, 1].
  static constexpr double min_top_p_exclusive = 0.0;
  static constexpr double max_top_p = 1.0;
  /// top_k in [0, 2^31 - 1].
  static constexpr int64_t min_top_k = 0;
  static constexpr int64_t max_top_k = std::numeric_limits<int32_t>::max();
  /// presence_penalty and frequency_penalty in [-2, 2] (OpenAI's range).
  static constexpr double min_penalty = -2.0;
  static constexpr double max_penalty = 2.0;
  /// repetition_penalty in (0, 2]; 1 is off.
  static constexpr double max_repetition_penalty = 2.0;
  /// Each logit_bias value in [-100, 100], at most 300 entries (OpenAI's limits).
  static constexpr double max_abs_logit_bias = 100.0;
  static constexpr std::size_t max_logit_bias_entries = 300;
  /// At most this many stop_token_ids.
  static constexpr std::size_t max_stop_token_ids = 256;
};

/// A real in messages: the shortest form that reads back exactly ("2.5", "0.1", "1e+300"), "nan",
/// "inf" or "-inf"; no ".0" is forced ("2"). The configuration's messages use it too.
std::string display_real(double x);

/// What is wrong with a max_tokens ("must be at least 1, got 0"), or "" when it is allowed.
std::string max_tokens_problem(int64_t value);

/// What is wrong with a temperature ("must be between 0 and 2, got 2.5"), or "".
std::string temperature_problem(double value);

/// What is wrong with a top_p ("must be greater than 0 and at most 1, got 0"), or "".
std::string top_p_problem(double value);

/// What is wrong with a top_k ("must be at least 0, got -1"), or "".
std::string top_k_problem(int64_t value);

/// What is wrong with a presence or frequency penalty ("must be between -2 and 2, got 3"), or "".
std::string penalty_problem(double value);

/// What is wrong with a repetition_penalty ("must be greater than 0 and at most 2, got 0"), or "".
std::string repetition_penalty_problem(double value);

/// What is wrong with one logit_bias value ("must be between -100 and 100, got 101"), or "".
std::string logit_bias_problem(double value);

/// What is wrong with a min_tokens for `max_tokens` ("must be at most max_tokens (16), got 20"),
/// or "".
std::string min_tokens_problem(int64_t value, int64_t max_tokens);

}  // namespace conveyor
