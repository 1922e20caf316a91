#include "pipeline/executor_core.hpp"

#include <algorithm>
#include <limits>

namespace conveyor::pipeline {

executor_core::executor_core(std::string name, std::unique_ptr<model::causal_lm> model,
                             std::shared_ptr<const model::tokenizer> tokenizer)
    : name_(std::move(name)),
      model_(std::move(model)),
      tokenizer_(std::move(tokenizer)),
      max_batched_tokens_(2048) {
  for (int32_t s = model_->slots() - 1; s >= 0; --s) free_slots_.push_back(s);
}

int32_t executor_core::free_slots() const {
  if (static_batch_ && has_work()) return 0;
  return static_cast<int32_t>(free_slots_.size());
}

std::vector<request_id> executor_core::active_ids() const {
  std::vector<request_id> ids;
  for (const auto& s : waiting_) ids.push_back(s->req.id);
  for (const auto& s : running_)
    if (!s->ended) ids.push_back(s->req.id);
  return ids;
}

void executor_core::admit(std::vector<sequence_request> requests, bool static_batch,
                          step_output& out) {
  if (!has_work()) static_batch_ = static_batch;
  const stamp now = clock_();
  for (auto& req : requests) {
    if (free_slots_.empty() || (static_batch_ != static_batch)) {
      out.results.push_back(make_failure(req.id, outcome::failed, ec::internal,
                                         "executor " + name_ + " has no free slot", req.times,
                                         int32_t(req.prompt.size())));
      continue;
    }
    const auto& p = req.params;
    model::sampler sampler{model::sampling_params{p.temperature, p.top_p, p.top_k, p.seed}};
    model::stop_string_matcher stops{p.stop};
    // The first token follows the prompt's last (BOS alone for an empty prompt).
    const int32_t preceding = req.prompt.empty() ? -1 : req.prompt.back();
    auto s = std::make_unique<sequence>(sequence{std::move(req),
                                                 free_slots_.back(),
                                                 0,
                                                 0,
                                                 0,
                                                 false,
                                                 false,
                                                 std::move(sampler),
                                                 model::incremental_detokenizer{tokenizer_,
                                                                                preceding},
                                                 std::move(stops),
                                                 {},
                                                 std::nullopt,
                                                 nullptr,
                                                 {}});
    free_slots_.pop_back();
    const auto& params = s->req.params;  // req was moved
    s->end_ids = end_ids_of(params);
    model::logit_settings settings{params.presence_penalty, params.frequency_penalty,
                                   params.repetition_penalty, params.logit_bias,
                                   params.min_tokens, {}};
    if (settings.min_tokens > 0) settings.min_tokens_masked = s->end_ids;
    if (settings.active())
      s->processor = std::make_unique<model::logit_processor>(std::move(settings), s->req.prompt);
    // Before min_tokens, stop strings do not end the sequence: the matcher starts empty and
    // gets the stop strings with the min_tokens-th token (emit).
    if (params.min_tokens > 0) s->stops = model::stop_string_matcher{{}};
    s->req.times.admitted = now;
    waiting_.push_back(std::move(s));
  }
}

bool executor_core::cancel(request_id id) {
  for (auto& s : waiting_)
    if (s->req.id == id) return s->cancel_requested = true;
  for (auto& s : running_)
    if (s->req.id == id && !s->ended) return s->cancel_requested = true;
  return false;
}

std::vector<int32_t> executor_core::end_ids_of(const generation_params& p) const {
  // stop_token_ids end a sequence even with ignore_eos.
  std::vector<int32_t> ids = p.stop_token_ids;
  if (p.ignore_eos || model_->ignores_end_tokens()) return ids;
  const auto& end_ids = model_->end_ids();
  if (!end_ids.empty())
    // A Hugging Face model's own end ids (generation_config.json's eos_token_id).
    ids.insert(ids.end(), end_ids.begin(), end_ids.end());
  else
    // stories260K ends a story with BOS; llama2.c's run.c stops on BOS and EOS alike.
    ids.insert(ids.end(), {tokenizer_->bos_id(), tokenizer_->eos_id()});
  return ids;
}

bool executor_core::is_end_token(const sequence& s, int32_t token) const {
  return std::find(s.end_ids.begin(), s.end_ids.end(), token) != s.end_ids.end();
}

step_output executor_core::step() {
  step_output out;
  const stamp now = clock_();
  // Step boundary: cancellations and deadlines.
  auto boundary = [&](sequence& s) {
    if (s.ended) return;
    if (s.cancel_requested)
      finish(s, outcome::cancelled, finish_reason::none, ec::cancelled, "request cancelled", out);
    else if (s.req.deadline != 0 && now >= s.req.deadline)
      finish(s, outcome::expired, finish_reason::none, ec::expired,
             "deadline passed after " + std::to_string(s.generated) + " tokens", out);
  };
  for (auto& s : waiting_) boundary(*s);
  for (auto& s : running_) boundary(*s);
  release_ended();
  run_step(out);
  release_ended();
  return out;
}

void executor_core::run_step(step_output& out) {
  // Newly admitted sequences, up to the token budget (always at least one).
  std::vector<std::unique_ptr<sequence>> batch;
  int64_t prompt_tokens = 0;
  int32_t longest = 0;
  while (!waiting_.empty()) {
    auto& s = waiting_.front();
    if (s->ended) {
      // Cancelled or expired before its first step (a static batch keeps such members waiting
      // past release_ended): it never had rows, so its slot is free now.
      free_slots_.push_back(s->slot);
      waiting_.pop_front();
      continue;
    }
    const int32_t n = int32_t(s->req.prompt.size());
    if (!batch.empty() && !static_batch_ && prompt_tokens + n > max_batched_tokens_) break;
    longest = std::max(longest, n);
    prompt_tokens += n;
    batch.push_back(std::move(s));
    waiting_.pop_front();
  }
  // One forward pass for everything: the new prompts, then one token of every sequence that was
  // already running. A static batch pads its prompts to the longest, and its ended members keep
  // their rows until the batch ends, as a padded batch does. A new prompt equal to an earlier
  // one of this step (the choices of a request with n > 1) is not computed again: it copies the
  // earlier one's KV-cache rows and samples from its logits with its own sampler.
  items_.clear();
  rows_.clear();
  followers_.clear();
  padded_prompts_.resize(batch.size());
  int64_t computed = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    auto& s = *batch[i];
    const int32_t n = int32_t(s.req.prompt.size());
    // A follower that reports its prompt's log-probabilities needs its own rows of logits.
    if (!static_batch_ && n > 0 && !s.req.params.prompt_logprobs && model_->copies_prefixes()) {
      auto leader = std::find_if(rows_.begin(), rows_.end(),
                                 [&](const sequence* l) { return l->req.prompt == s.req.prompt; });
      if (leader != rows_.end()) {
        followers_.push_back({&s, size_t(leader - rows_.begin())});
        prompt_tokens -= n;  // not processed: the step's real tokens count it once
        continue;
      }
    }
    if (static_batch_ && n < longest) {
      // Right padding: the pad tokens sit after the prompt, where the causal mask keeps them
      // from changing the prompt's logits; decoding later overwrites their cache rows.
      auto& p = padded_prompts_[i];
      p.assign(s.req.prompt.begin(), s.req.prompt.end());
      p.resize(size_t(std::min(longest, model_->context())), s.req.prompt.back());
      items_.push_back(
          {s.slot, 0, p.data(), int32_t(p.size()), n - 1, s.req.params.prompt_logprobs});
    } else {
      items_.push_back({s.slot, 0, s.req.prompt.data(), n, -1, s.req.params.prompt_logprobs});
    }
    computed += items_.back().count;
    rows_.push_back(&s);
  }
  const size_t admitted = rows_.size();
  int64_t decoded = 0;
  for (auto& s : running_) {
    if (s->position >= model_->context()) continue;
    if (s->ended && !static_batch_) continue;
    items_.push_back({s->slot, s->position, &s->next_token, 1, -1});
    rows_.push_back(s.get());
    ++computed;
    if (!s->ended) ++decoded;
  }
  if (batch.empty() && decoded == 0) return;
  const stamp start = clock_();
  auto logits = model_->prefill(items_);
  for (auto& f : followers_)
    model_->copy_prefix(rows_[f.leader_row]->slot, f.seq->slot, int32_t(f.seq->req.prompt.size()));
  const stamp done = clock_();
  int32_t row = 0;  // an item with all_logits has a row per token
  sample_rows_.resize(rows_.size());
  for (size_t i = 0; i < rows_.size(); ++i) {
    sequence& s = *rows_[i];
    const auto& item = items_[i];
    const int32_t first_row = row;
    row += item.all_logits ? item.count : 1;
    sample_rows_[i] =
        item.all_logits ? first_row + (item.logits_at < 0 ? item.count - 1 : item.logits_at)
                        : first_row;
    if (i < admitted) {
      s.position = int32_t(s.req.prompt.size());
      if (item.all_logits && !s.ended) emit_prompt_logprobs(s, logits, first_row, out);
      end_if_prompt_only(s, done, out);
    } else {
      ++s.position;
    }
    if (!s.ended) emit(s, sample_next(s, logits.row(sample_rows_[i]), logits.vocab), done, out);
  }
  for (auto& f : followers_) {
    sequence& s = *f.seq;
    s.position = int32_t(s.req.prompt.size());
    end_if_prompt_only(s, done, out);
    if (!s.ended)
      emit(s, sample_next(s, logits.row(sample_rows_[f.leader_row]), logits.vocab), done, out);
  }
  for (auto& s : batch) running_.push_back(std::move(s));
  out.step_timings.push_back(
      step_timing{name_, admitted > 0 ? step_kind::prefill : step_kind::decode, items_.size(),
                  size_t(prompt_tokens + decoded), size_t(computed), to_time_point(start),
                  std::chrono::nanoseconds(done - start)});
}

void executor_core::end_if_prompt_only(sequence& s, stamp now, step_output& out) {
  // max_tokens 0 (echo): the prompt was all that was asked for.
  if (s.req.params.max_tokens != 0 || s.ended) return;
  s.req.times.first_token = now;
  finish(s, outcome::finished, finish_reason::length, ec::none, {}, out);
}

int32_t executor_core::sample_next(sequence& s, const float* logits, int32_t vocab) {
  // -- logit processing: penalties, bias and min_tokens on a copy of the row --
  if (s.processor) {
    scratch_row_.assign(logits, logits + vocab);
    s.processor->apply(scratch_row_.data(), vocab);
    logits = scratch_row_.data();
  }
  // -- end of logit processing --
  const int32_t token = s.sampler.sample(logits, vocab);
  if (s.processor) s.processor->accept(token);
  // Log-probabilities (issue 14): of the very row the sampler drew from (processed), under its
  // settings.
  if (s.req.params.logprobs >= 0)
    s.scores = model::sampled_logprobs(logits, vocab, s.sampler.params(), token,
                                       std::min(s.req.params.logprobs, model::max_top_logprobs));
  return token;
}

namespace {

// A position's scores with each token's text in the context of `detokenizer`.
token_logprob describe(const model::token_scores& scores,
                       const model::incremental_detokenizer& detokenizer) {
  token_logprob entry;
  entry.chosen = {scores.chosen.id, scores.chosen.logprob, detokenizer.peek(scores.chosen.id)};
  entry.top.reserve(scores.top.size());
  for (const auto& t : scores.top) entry.top.push_back({t.id, t.logprob, detokenizer.peek(t.id)});
  return entry;
}

}  // namespace

token_chunk& executor_core::chunk_of(const sequence& s, step_output& out) {
  if (out.chunks.empty() || out.chunks.back().id != s.req.id)
    out.chunks.push_back(token_chunk{s.req.id, {}, {}, {}, {}});
  return out.chunks.back();
}

void executor_core::emit_prompt_logprobs(sequence& s, const model::logits_view& logits,
                                         int32_t first_row, step_output& out) {
  const auto& prompt = s.req.prompt;
  const int32_t top_n = std::max(0, std::min(s.req.params.logprobs, model::max_top_logprobs));
  std::vector<token_logprob> entries;
  entries.reserve(prompt.size());
  // Texts as the prompt decodes: the space after BOS dropped, as decode_prompt does.
  model::incremental_detokenizer detokenizer{tokenizer_, -1};
  for (size_t t = 0; t < prompt.size(); ++t) {
    if (t == 0) {
      // The first token follows nothing: no log-probability.
      entries.push_back(
          {{prompt[0], std::numeric_limits<float>::quiet_NaN(), detokenizer.peek(prompt[0])}, {}});
    } else {
      // Teacher-forced: token t under the raw distribution after tokens 0..t-1.
      entries.push_back(describe(model::raw_logprobs(logits.row(first_row + int32_t(t) - 1),
                                                     logits.vocab, prompt[t], top_n),
                                 detokenizer));
    }
    detokenizer.push(prompt[t]);
  }
  chunk_of(s, out).prompt_logprobs = std::move(entries);
}

void executor_core::emit(sequence& s, int32_t token, stamp now, step_output& out) {
  if (s.req.times.first_token == 0) s.req.times.first_token = now;
  s.token_times.push_back(to_time_point(now));
  // Log-probabilities (issue 14): the texts in the context before this token.
  std::optional<token_logprob> scored;
  if (s.scores) scored = describe(*s.scores, s.detokenizer);
  s.scores.reset();
  if (is_end_token(s, token)) {
    // Reported as vLLM does: the end token's log-probability comes last, with no text.
    if (scored) chunk_of(s, out).logprobs.push_back(std::move(*scored));
    finish(s, outcome::finished, finish_reason::stop, ec::none, {}, out);
    return;
  }
  s.next_token = token;
  ++s.generated;
  // min_tokens: stop strings count from the min_tokens-th token on, as vLLM checks them.
  if (s.generated == s.req.params.min_tokens)
    s.stops = model::stop_string_matcher{s.req.params.stop};
  std::string text = s.stops.push(s.detokenizer.push(token));
  // The token that completes a stop string keeps its log-probability, though its text is cut.
  if (!text.empty() || !s.stops.stopped() || scored) {
    auto& chunk = chunk_of(s, out);
    chunk.text += text;
    chunk.tokens.push_back(token);
    if (scored) chunk.logprobs.push_back(std::move(*scored));
  }
  if (s.stops.stopped()) {
    finish(s, outcome::finished, finish_reason::stop, ec::none, {}, out);
  } else if (s.generated >= s.req.params.max_tokens || s.position + 1 >= model_->context()) {
    finish(s, outcome::finished, finish_reason::length, ec::none, {}, out);
  }
}

void executor_core::finish(sequence& s, outcome how, finish_reason reason, ec code,
                           std::string message, step_output& out) {
  if (s.ended) return;
  s.ended = true;
  request_result r;
  r.id = s.req.id;
  r.how = how;
  r.reason = reason;
  r.code = code;
  r.message = std::move(message);
  r.prompt_tokens = int32_t(s.req.prompt.size());
  r.completion_tokens = s.generated;
  r.times = s.req.times;
  r.times.finished = clock_();
  // Text still held back (an incomplete character, a possible stop string) ends the answer,
  // unless a stop string matched: then what follows it is dropped.
  if (how == outcome::finished && !s.stops.stopped()) {
    r.tail = s.stops.push(s.detokenizer.flush());
    r.tail += s.stops.flush();
  }
  request_timing t = timing_of(r);
  t.token_times = std::move(s.token_times);
  out.request_timings.push_back(std::move(t));
  out.results.push_back(std::move(r));
}

void executor_core::release_ended() {
  // A static batch holds every slot until all of its members have ended.
  if (static_batch_) {
    bool all_ended = waiting_.empty();
    for (auto& s : running_) all_ended = all_ended && s->ended;
    if (!all_ended) return;
  }
  auto release = [&](auto& container) {
    for (auto it = container.begin(); it != container.end();) {
      if ((*it)->ended) {
        free_slots_.push_back((*it)->slot);
        it = container.erase(it);
      } else {
        ++it;
      }
    }
  };
  release(waiting_);
  release(running_);
}

void executor_core::abort_all(outcome how, ec code, const std::string& message, step_output& out) {
  for (auto& s : waiting_) finish(*s, how, finish_reason::none, code, message, out);
  for (auto& s : running_) finish(*s, how, finish_reason::none, code, message, out);
  bool was_static = static_batch_;
  static_batch_ = false;
  release_ended();
  static_batch_ = was_static && has_work();
}

}  // namespace conveyor::pipeline
