// The checks of a request's generation parameters that the pipeline itself makes, for callers
// that embed it without the HTTP server (which checks the client's fields first), and the one
// check that a prompt with its max_tokens fits in the context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "pipeline/request.hpp"

namespace conveyor::pipeline {

/// The problem with `params` (against conveyor::sampling_limits) and `timeout_s` (seconds, 0
/// for the default, at most `max_timeout_s`), or nullopt when the pipeline can run them.
std::optional<std::string> check_request(const sampling::sampling_params& params, double timeout_s);

/// The problem when a prompt of `prompt_tokens` tokens and `max_tokens` more do not fit in
/// `context` tokens ("the prompt has 5 tokens and max_tokens is 510: together 515, more than the
/// context of 512 tokens"), or nullopt. The tokenizer workers and `conveyor generate` use it.
std::optional<std::string> check_context(std::size_t prompt_tokens, int32_t max_tokens,
                                         int32_t context);

}  // namespace conveyor::pipeline
