#include "pipeline/token_sampler.hpp"

#include <algorithm>

namespace conveyor::pipeline {

token_sampler::token_sampler(const sampling::sampling_params& params,
                             sampling::logit_settings settings, const std::vector<int32_t>& prompt,
                             int32_t top_logprobs)
    : sampler_(params), top_logprobs_(std::min(top_logprobs, sampling::max_top_logprobs)) {
  if (settings.active())
    processor_ = std::make_unique<sampling::logit_processor>(std::move(settings), prompt);
}

sampled_token token_sampler::sample(const float* logits, int32_t vocab,
                                    std::vector<float>& scratch) {
  if (processor_) {
    scratch.assign(logits, logits + vocab);
    processor_->apply(scratch.data(), vocab);
    logits = scratch.data();
  }
  sampled_token picked;
  picked.token = sampler_.sample(logits, vocab);
  if (processor_) processor_->accept(picked.token);
  if (top_logprobs_ >= 0)
    picked.scores =
        sampling::sampled_logprobs(logits, vocab, sampler_.params(), picked.token, top_logprobs_);
  return picked;
}

token_sampler sampler_for(const generation_params& params, const std::vector<int32_t>& prompt,
                          const std::vector<int32_t>& end_ids) {
  const sampling::sampling_params drawing{params.temperature, params.top_p, params.top_k,
                                          params.seed};
  sampling::logit_settings settings{params.presence_penalty,   params.frequency_penalty,
                                    params.repetition_penalty, params.logit_bias,
                                    params.min_tokens,         {}};
  if (settings.min_tokens > 0) settings.min_tokens_masked = end_ids;
  return token_sampler{drawing, std::move(settings), prompt, params.logprobs};
}

}  // namespace conveyor::pipeline
