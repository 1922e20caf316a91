#include "pipeline/executor_core.hpp"

#include <chrono>
#include <exception>

namespace conveyor::pipeline {

namespace {

// The ids that end every sequence of `m` that does not ignore them: a Hugging Face model's own
// (generation_config.json's eos_token_id), else the tokenizer's BOS and EOS (stories260K ends a
// story with BOS; llama2.c's run.c stops on BOS and EOS alike); none for a model without real
// end tokens.
std::vector<int32_t> model_end_ids(const model::causal_lm& m, const tokenizers::tokenizer& tok) {
  if (m.ignores_end_tokens()) return {};
  if (!m.end_ids().empty()) return m.end_ids();
  return {tok.bos_id(), tok.eos_id()};
}

}  // namespace

executor_core::executor_core(std::string name, std::unique_ptr<model::causal_lm> model,
                             std::shared_ptr<const tokenizers::tokenizer> tokenizer,
                             bool prefix_caching)
    : name_(std::move(name)),
      model_(std::move(model)),
      scheduler_(model_->slots(), model_->context(),
                 kv_cache_layout{model_->block_size(), model_->kv_blocks(), prefix_caching}),
      outputs_(tokenizer, model_->context(), model_end_ids(*model_, *tokenizer)) {}

void executor_core::set_overlap_masks(bool on) {
  if (!on && masks_) masks_->wait();
  masks_ = on ? std::make_unique<mask_worker>() : nullptr;
}

void executor_core::set_clock(std::function<stamp()> clock) {
  clock_ = std::move(clock);
  outputs_.set_clock(clock_);
}

std::unique_ptr<sequence> executor_core::make_sequence(sequence_request req) const {
  output_state output = outputs_.start(req);
  token_sampler sampler{req.params, req.prompt, output.end_ids, req.grammar};
  if (masks_) sampler.defer_masks();
  return std::make_unique<sequence>(std::move(req), std::move(sampler), std::move(output));
}

void executor_core::admit(std::vector<sequence_request> requests, bool static_batch,
                          step_output& out) {
  scheduler_.open_admission(static_batch);
  const stamp now = clock_();
  for (auto& req : requests) {
    if (!scheduler_.has_slot_for(static_batch)) {
      out.results.push_back(make_failure(req.id, outcome::failed, ec::internal,
                                         "executor " + name_ + " has no free slot", req.times,
                                         int32_t(req.prompt.size())));
      continue;
    }
    if (req.prompt.empty()) {
      out.results.push_back(make_failure(req.id, outcome::failed, ec::bad_request,
                                         "the prompt has no tokens", req.times, 0));
      continue;
    }
    // A constraint that arrived uncompiled (from another machine, or from an embedder that
    // bypasses the tokenizers) is compiled here; the cache makes a repeated one cheap.
    if (req.params.constraint.active() && !req.grammar) {
      auto compiled =
          grammars_ ? grammars_->compile(req.params.constraint)
                    : expected<std::shared_ptr<const grammar::compiled_grammar>>{make_error(
                          ec::bad_request, "executor " + name_ + " has no grammar compiler for '" +
                                               req.params.constraint.field + "'")};
      if (!compiled) {
        out.results.push_back(make_failure(req.id, outcome::rejected, code_of(compiled.error()),
                                           message_of(compiled.error()), req.times,
                                           int32_t(req.prompt.size())));
        continue;
      }
      req.grammar = std::move(*compiled);
    }
    // The format's engine may fail on its first mask; only this request ends.
    const request_id id = req.id;
    const request_times times = req.times;
    const auto prompt_tokens = int32_t(req.prompt.size());
    std::unique_ptr<sequence> seq;
    try {
      seq = make_sequence(std::move(req));
    } catch (const std::exception& e) {
      out.results.push_back(
          make_failure(id, outcome::failed, ec::internal, e.what(), times, prompt_tokens));
      continue;
    }
    scheduler_.admit(std::move(seq), now);
  }
}

step_output executor_core::step() {
  step_output out;
  // Step boundary: cancellations and deadlines.
  for (auto& end : scheduler_.ends_at(clock_()))
    outputs_.finish(*end.seq, end.how, finish_reason::none, end.code, std::move(end.message), out);
  scheduler_.release_ended();
  try {
    run_step(out);
  } catch (const std::exception& e) {
    // The results gathered so far stay in `out`; every sequence still open ends with them.
    out.failure = e.what();
    abort_all(outcome::failed, ec::model_failure, "the model failed: " + out.failure, out);
    return out;
  }
  scheduler_.release_ended();
  // The block gauges as the step leaves them: the blocks of the sequences it ended are back.
  if (!out.step_timings.empty()) {
    auto& t = out.step_timings.back();
    t.kv_blocks_used = scheduler_.blocks().used_blocks();
    t.kv_blocks_cached = scheduler_.blocks().cached_blocks();
    t.kv_blocks_free = scheduler_.blocks().free_blocks();
  }
  return out;
}

void executor_core::run_step(step_output& out) {
  // -- schedule --
  const scheduled_step& step = scheduler_.schedule();
  if (step.idle()) return;
  // -- model forward --
  const stamp start = clock_();
  auto logits = model_->prefill(step.items);
  for (const auto& [from, to] : step.block_copies) model_->copy_block(from, to);
  // The masks computed while the model ran.
  if (masks_) masks_->wait();
  const stamp done = clock_();
  scheduler_.advance(step, double(done - start) / 1e6);
  // -- sample and process outputs, row by row --
  for (const auto& row : step.rows) {
    sequence& s = *row.seq;
    if (row.prefill) {
      if (row.resumes) continue;  // recomputed cache: its logits were sampled from before
      if (row.all_logits && !s.ended)
        outputs_.score_prompt_chunk(s, logits, row.first_logits_row, row.prompt_start,
                                    row.prompt_count);
      if (!row.completes) continue;  // the prompt continues in a later step
      outputs_.complete_prompt(s, done, out);
    }
    if (!s.ended) sample(s, logits.row(row.sample_logits_row), logits.vocab, done, out);
  }
  for (const auto& f : step.followers) {
    sequence& s = *f.seq;
    outputs_.complete_prompt(s, done, out);
    if (!s.ended)
      sample(s, logits.row(step.rows[f.leader_row].sample_logits_row), logits.vocab, done, out);
  }
  if (masks_) masks_->start(std::move(pending_masks_));
  pending_masks_.clear();
  out.step_timings.push_back(step_timing{
      name_, step.prefill_rows > 0 ? step_kind::prefill : step_kind::decode, step.items.size(),
      size_t(step.prompt_tokens + step.decoded), size_t(step.computed), to_time_point(start),
      std::chrono::nanoseconds(done - start)});
}

void executor_core::sample(sequence& s, const float* logits, int32_t vocab, stamp now,
                           step_output& out) {
  const auto& matcher = s.sampler.matcher();
  // The mask computed since the last token (overlapped, or a format complete before its first
  // token): the format may have failed or be complete, which ends the sequence before this row
  // is used.
  if (matcher) {
    if (!matcher->failure().empty()) {
      outputs_.finish(s, outcome::failed, finish_reason::none, ec::internal,
                      "the output format failed: " + matcher->failure(), out);
      return;
    }
    if (matcher->finished()) {
      outputs_.finish(s, outcome::finished, finish_reason::stop, ec::none, {}, out);
      return;
    }
  }
  sampled_token picked = s.sampler.sample(logits, vocab, scratch_row_);
  if (picked.format_broken) {
    const auto* m = s.sampler.matcher().get();
    outputs_.finish(s, outcome::failed, finish_reason::none, ec::internal,
                    m && !m->failure().empty()
                        ? "the output format failed: " + m->failure()
                        : "the output format refused token " + std::to_string(picked.token) +
                              ", which its own mask allowed",
                    out);
    return;
  }
  // The next step feeds the token to the model, unless it ends the sequence.
  if (!output_processor::is_end_token(s, picked.token)) s.schedule.next_token = picked.token;
  outputs_.emit(s, std::move(picked), now, out);
  if (matcher && masks_ && !s.ended) pending_masks_.push_back(matcher);
}

void executor_core::abort_all(outcome how, ec code, const std::string& message, step_output& out) {
  for (sequence* s : scheduler_.sequences())
    outputs_.finish(*s, how, finish_reason::none, code, message, out);
  scheduler_.release_all_ended();
}

}  // namespace conveyor::pipeline
