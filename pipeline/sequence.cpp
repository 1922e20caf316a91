#include "pipeline/sequence.hpp"

namespace conveyor::pipeline {

output_state::output_state(std::vector<int32_t> end_ids,
                           tokenizers::incremental_detokenizer detokenizer,
                           sampling::stop_string_matcher stops)
    : end_ids(std::move(end_ids)), detokenizer(std::move(detokenizer)), stops(std::move(stops)) {}

sequence::sequence(sequence_request request, token_sampler sampler, output_state output)
    : req(std::move(request)), sampler(std::move(sampler)), output(std::move(output)) {}

}  // namespace conveyor::pipeline
