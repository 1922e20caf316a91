// The tokenizer workers: encode prompts and reject those that cannot fit in the context.
#include "actors/tokenizer_actor.hpp"

#include <caf/all.hpp>

#include "actors/caf_error.hpp"
#include "pipeline/request_checks.hpp"

namespace conveyor {

tokenizer_actor::behavior_type tokenizer_worker(
    tokenizer_actor::pointer, std::shared_ptr<const tokenizers::tokenizer> tokenizer,
    int32_t context, std::shared_ptr<const grammar::grammar_compiler> grammars) {
  return {
      [=](atom::encode, generate_request& req) -> caf::result<sequence_request> {
        sequence_request seq;
        seq.id = req.id;
        if (req.prompt_tokens.empty()) {
          auto encoded = tokenizer->encode(req.prompt, req.add_bos);
          if (!encoded) return to_caf_error(std::move(encoded).error());
          seq.prompt = std::move(*encoded);
        } else {
          seq.prompt = std::move(req.prompt_tokens);
        }
        seq.params = std::move(req.params);
        seq.priority = req.priority;
        seq.times.arrival = req.arrival;
        seq.times.tokenized = now_stamp();
        for (auto id : seq.prompt)
          if (id < 0 || id >= tokenizer->vocab_size())
            return to_caf_error(
                make_error(ec::bad_request, "prompt token id " + std::to_string(id) +
                                                " is outside the vocabulary (0.." +
                                                std::to_string(tokenizer->vocab_size() - 1) + ")"));
        // Token ids of the logit processing: within the vocabulary too.
        const int32_t vocab = tokenizer->vocab_size();
        for (const auto& b : seq.params.logit_bias)
          if (b.id < 0 || b.id >= vocab)
            return to_caf_error(make_error(ec::bad_request, "logit_bias token id " +
                                                                std::to_string(b.id) +
                                                                " is outside the vocabulary (0.." +
                                                                std::to_string(vocab - 1) + ")"));
        for (auto id : seq.params.stop_token_ids)
          if (id < 0 || id >= vocab)
            return to_caf_error(make_error(ec::bad_request, "stop token id " + std::to_string(id) +
                                                                " is outside the vocabulary (0.." +
                                                                std::to_string(vocab - 1) + ")"));
        if (auto problem = pipeline::check_context(seq.prompt.size(), seq.params.max_tokens, context))
          return to_caf_error(make_error(ec::prompt_too_long, std::move(*problem)));
        // The output format, compiled here, off the executors' step loops (or taken from the
        // compiler's cache).
        if (seq.params.constraint.active()) {
          if (!grammars)
            return to_caf_error(make_error(ec::bad_request, "'" + seq.params.constraint.field +
                                                                "': this pipeline compiles no "
                                                                "output formats"));
          auto compiled = grammars->compile(seq.params.constraint);
          if (!compiled) return to_caf_error(std::move(compiled).error());
          seq.grammar = std::move(*compiled);
        }
        return seq;
      },
  };
}

namespace {

struct pool_state {
  static inline const char* name = "tokenizer_pool";
  std::vector<tokenizer_actor> workers;
  size_t next = 0;
};

/// Hands each request to the next worker in turn; the worker answers the requester directly.
tokenizer_actor::behavior_type tokenizer_pool(
    tokenizer_actor::stateful_pointer<pool_state> self, std::vector<tokenizer_actor> workers) {
  for (auto& w : workers) self->link_to(w);
  self->state.workers = std::move(workers);
  return {
      [=](atom::encode encode, generate_request& req) -> caf::delegated<sequence_request> {
        auto& st = self->state;
        const auto& worker = st.workers[st.next++ % st.workers.size()];
        return self->delegate(worker, encode, std::move(req));
      },
  };
}

}  // namespace

tokenizer_actor spawn_tokenizer_pool(caf::actor_system& system, size_t workers,
                                     std::shared_ptr<const tokenizers::tokenizer> tokenizer,
                                     int32_t context,
                                     std::shared_ptr<const grammar::grammar_compiler> grammars) {
  std::vector<tokenizer_actor> pool;
  // Detached: a worker waiting for a grammar's compilation holds its own thread, not one of the
  // scheduler's.
  for (size_t i = 0; i < std::max<size_t>(1, workers); ++i)
    pool.push_back(system.spawn<caf::detached>(tokenizer_worker, tokenizer, context, grammars));
  return system.spawn(tokenizer_pool, std::move(pool));
}

}  // namespace conveyor
