#include "pipeline/token_sampler.hpp"

#include <algorithm>

namespace conveyor::pipeline {

token_sampler::token_sampler(const sampling::sampling_params& params,
                             const std::vector<int32_t>& prompt,
                             const std::vector<int32_t>& end_ids)
    : sampler_(params), top_logprobs_(std::min(params.logprobs, sampling::max_top_logprobs)) {
  if (sampling::logit_processor::needed(params, end_ids))
    processor_ = std::make_unique<sampling::logit_processor>(params, end_ids, prompt);
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

}  // namespace conveyor::pipeline
