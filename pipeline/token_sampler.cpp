#include "pipeline/token_sampler.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace conveyor::pipeline {

token_sampler::token_sampler(const sampling::sampling_params& params,
                             const std::vector<int32_t>& prompt,
                             const std::vector<int32_t>& end_ids)
    : token_sampler(params, prompt, end_ids, nullptr) {}

token_sampler::token_sampler(const sampling::sampling_params& params,
                             const std::vector<int32_t>& prompt,
                             const std::vector<int32_t>& end_ids,
                             std::shared_ptr<const grammar::compiled_grammar> format)
    : sampler_(params),
      top_logprobs_(std::min(params.logprobs, sampling::max_top_logprobs)),
      end_ids_(end_ids) {
  if (sampling::logit_processor::needed(params, end_ids))
    processor_ = std::make_unique<sampling::logit_processor>(params, end_ids, prompt);
  if (format) {
    matcher_ = std::make_shared<grammar::token_matcher>(std::move(format), end_ids);
    if (!matcher_->update_mask())
      throw std::runtime_error("the output format failed: " + matcher_->failure());
  }
}

sampled_token token_sampler::sample(const float* logits, int32_t vocab,
                                    std::vector<float>& scratch) {
  if (processes_logits()) {
    scratch.assign(logits, logits + vocab);
    // The format's mask first: penalties and bias cannot bring back a token it forbids.
    if (matcher_) matcher_->apply_mask(scratch.data(), vocab);
    if (processor_) processor_->apply(scratch.data(), vocab);
    logits = scratch.data();
  }
  sampled_token picked;
  picked.token = sampler_.sample(logits, vocab);
  if (processor_) processor_->accept(picked.token);
  if (top_logprobs_ >= 0)
    picked.scores =
        sampling::sampled_logprobs(logits, vocab, sampler_.params(), picked.token, top_logprobs_);
  if (matcher_) {
    const bool ends = std::find(end_ids_.begin(), end_ids_.end(), picked.token) != end_ids_.end();
    // An end token ends the sequence; the matcher takes it only where the format may end.
    if (!matcher_->accept(picked.token) && !ends) {
      picked.format_broken = true;
    } else if (!ends && !defer_masks_) {
      picked.format_broken = !matcher_->update_mask();
      picked.format_complete = matcher_->finished();
    }
  }
  return picked;
}

}  // namespace conveyor::pipeline
