// The tokenizer workers and their pool.
#pragma once

#include <memory>

#include <caf/fwd.hpp>

#include "grammar/grammar_compiler.hpp"
#include "pipeline/actors.hpp"
#include "tokenizers/tokenizer.hpp"

namespace conveyor {

/// One tokenizer worker: (encode, generate_request) -> sequence_request, or an error
/// (prompt_too_long, bad_request). A request with an output format gets it compiled by
/// `grammars` (refused when null).
tokenizer_actor::behavior_type tokenizer_worker(
    tokenizer_actor::pointer self, std::shared_ptr<const tokenizers::tokenizer> tokenizer,
    int32_t context, std::shared_ptr<const grammar::grammar_compiler> grammars = nullptr);

/// A round-robin pool of `workers` tokenizer workers behind one handle of the same interface;
/// the workers end with the pool.
tokenizer_actor spawn_tokenizer_pool(
    caf::actor_system& system, size_t workers,
    std::shared_ptr<const tokenizers::tokenizer> tokenizer, int32_t context,
    std::shared_ptr<const grammar::grammar_compiler> grammars = nullptr);

}  // namespace conveyor
