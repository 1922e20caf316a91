// The pipeline's own checks of a request.
#include "pipeline/request_checks.hpp"

#include <sstream>

#include "common/deadline.hpp"
#include "common/sampling.hpp"

namespace conveyor::pipeline {

std::optional<std::string> check_request(const sampling::sampling_params& p, double timeout_s) {
  // With echo, max_tokens 0 asks for the prompt alone (its log-probabilities).
  if (auto problem = max_tokens_problem(p.max_tokens);
      !problem.empty() && !(p.echo && p.max_tokens == 0))
    return "max_tokens " + problem;
  if (p.logprobs < -1 || p.logprobs > 20)
    return "logprobs must be between 0 and 20 (-1: none), got " + std::to_string(p.logprobs);
  if (auto problem = temperature_problem(p.temperature); !problem.empty())
    return "temperature " + problem;
  if (auto problem = top_p_problem(p.top_p); !problem.empty()) return "top_p " + problem;
  if (auto problem = top_k_problem(p.top_k); !problem.empty()) return "top_k " + problem;
  if (auto problem = penalty_problem(p.presence_penalty); !problem.empty())
    return "presence_penalty " + problem;
  if (auto problem = penalty_problem(p.frequency_penalty); !problem.empty())
    return "frequency_penalty " + problem;
  if (auto problem = repetition_penalty_problem(p.repetition_penalty); !problem.empty())
    return "repetition_penalty " + problem;
  for (const auto& b : p.logit_bias)
    if (auto problem = logit_bias_problem(b.bias); !problem.empty())
      return "logit_bias of token " + std::to_string(b.id) + " " + problem;
  if (auto problem = min_tokens_problem(p.min_tokens, p.max_tokens); !problem.empty())
    return "min_tokens " + problem;
  if (!(timeout_s >= 0)) return std::string{"timeout must not be negative"};
  // Beyond this, seconds in nanoseconds overflow the deadline, which would expire at once.
  if (timeout_s > max_timeout_s) {
    std::ostringstream out;
    out << "timeout must be at most " << int64_t(max_timeout_s) << " seconds (a year), got "
        << timeout_s;
    return out.str();
  }
  return std::nullopt;
}

std::optional<std::string> check_context(std::size_t prompt_tokens, int32_t max_tokens,
                                         int32_t context) {
  const int64_t need = int64_t(prompt_tokens) + max_tokens;
  if (need <= context) return std::nullopt;
  return "the prompt has " + std::to_string(prompt_tokens) + " tokens and max_tokens is " +
         std::to_string(max_tokens) + ": together " + std::to_string(need) +
         ", more than the context of " + std::to_string(context) + " tokens";
}

}  // namespace conveyor::pipeline
