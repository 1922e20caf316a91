#include "pipeline/executor_core.hpp"

#include <algorithm>
#include <exception>
#include <limits>

namespace conveyor::pipeline {

executor_core::executor_core(std::string name, std::unique_ptr<model::causal_lm> model,
                             std::shared_ptr<const tokenizers::tokenizer> tokenizer)
    : name_(std::move(name)),
      model_(std::move(model)),
      tokenizer_(std::move(tokenizer)) {
  for (int32_t s = model_->slots() - 1; s >= 0; --s) free_slots_.push_back(s);
}

void executor_core::set_max_batched_tokens(int32_t n) {
  auto options = planner_.options();
  options.max_prompt_tokens = n;
  planner_ = step_planner{options};
}

void executor_core::set_step_plan_options(const step_plan_options& options) {
  planner_ = step_planner{options};
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
    if (req.prompt.empty()) {
      out.results.push_back(make_failure(req.id, outcome::failed, ec::bad_request,
                                         "the prompt has no tokens", req.times, 0));
      continue;
    }
    const auto& p = req.params;
    sampling::sampler sampler{p};
    // Before min_tokens, stop strings do not end the sequence: the matcher is armed with the
    // min_tokens-th token (emit), and finds a stop string that began before it.
    sampling::stop_string_matcher stops{p.stop, p.min_tokens <= 0};
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
                                                 tokenizers::incremental_detokenizer{tokenizer_,
                                                                                preceding},
                                                 std::move(stops),
                                                 {},
                                                 std::nullopt,
                                                 nullptr,
                                                 {},
                                                 0,
                                                 {},
                                                 std::nullopt});
    free_slots_.pop_back();
    const auto& params = s->req.params;  // req was moved
    s->end_ids = end_ids_of(params);
    // The end ids (stop_token_ids among them) cannot be sampled before min_tokens.
    if (sampling::logit_processor::needed(params, s->end_ids))
      s->processor = std::make_unique<sampling::logit_processor>(params, s->end_ids, s->req.prompt);
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

std::vector<int32_t> executor_core::end_ids_of(const sampling::sampling_params& p) const {
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
  try {
    run_step(out);
  } catch (const std::exception& e) {
    // The results gathered so far stay in `out`; every sequence still open ends with them.
    out.failure = e.what();
    abort_all(outcome::failed, ec::model_failure, "the model failed: " + out.failure, out);
    return out;
  }
  release_ended();
  return out;
}

void executor_core::run_step(step_output& out) {
  // Sequences that ended before their prompt was complete (a static batch keeps such members
  // waiting past release_ended): their slots are free now.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->ended) {
      free_slots_.push_back((*it)->slot);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  // One forward pass for everything: the chunks of prompts, then one token of every sequence
  // already running. A static batch pads its prompts to the longest, and its ended members keep
  // their rows until the batch ends, as a padded batch does.
  items_.clear();
  rows_.clear();
  followers_.clear();
  int64_t decoded = 0, decode_rows = 0, decode_attended = 0;
  for (auto& s : running_) {
    if (s->position >= model_->context()) continue;
    if (s->ended && !static_batch_) continue;
    ++decode_rows;
    decode_attended += s->position + 1;
    if (!s->ended) ++decoded;
  }
  if (static_batch_)
    plan_static_prefill();
  else
    plan_chunked_prefill(decode_rows, decode_attended);
  const size_t prefill_rows = rows_.size();
  int64_t prompt_tokens = 0, computed = 0, attended = decode_attended;
  for (size_t i = 0; i < prefill_rows; ++i) {
    const auto& item = items_[i];
    computed += item.count;
    attended += step_planner::attended_by(item.start, item.count);
    // Padding is computed but not a real token.
    const int64_t n = int64_t(rows_[i].seq->req.prompt.size());
    prompt_tokens += std::min<int64_t>(item.count, n - item.start);
  }
  for (auto& s : running_) {
    if (s->position >= model_->context()) continue;
    if (s->ended && !static_batch_) continue;
    items_.push_back({s->slot, s->position, &s->next_token, 1, -1});
    rows_.push_back({s.get(), false, false});
    ++computed;
  }
  if (prefill_rows == 0 && decoded == 0) return;
  const stamp start = clock_();
  auto logits = model_->prefill(items_);
  for (auto& f : followers_)
    model_->copy_prefix(rows_[f.leader_row].seq->slot, f.seq->slot,
                        int32_t(f.seq->req.prompt.size()));
  const stamp done = clock_();
  costs_.observe({decode_rows, computed - decode_rows, attended}, double(done - start) / 1e6);
  int32_t row = 0;  // an item with all_logits has a row per token
  sample_rows_.resize(rows_.size());
  for (size_t i = 0; i < rows_.size(); ++i) {
    sequence& s = *rows_[i].seq;
    const auto& item = items_[i];
    const int32_t first_row = row;
    row += item.all_logits ? item.count : 1;
    sample_rows_[i] =
        item.all_logits ? first_row + (item.logits_at < 0 ? item.count - 1 : item.logits_at)
                        : first_row;
    if (rows_[i].prefill) {
      const int32_t n = int32_t(s.req.prompt.size());
      const int32_t real = std::min(item.count, n - item.start);  // without padding
      if (item.all_logits && !s.ended) score_prompt_chunk(s, logits, first_row, item.start, real);
      s.prefilled = item.start + real;
      if (!rows_[i].completes) continue;  // the prompt continues in a later step
      s.position = n;
      if (!s.ended && s.req.params.prompt_logprobs)
        chunk_of(s, out).prompt_logprobs = std::move(s.prompt_entries);
      end_if_prompt_only(s, done, out);
    } else {
      ++s.position;
    }
    if (!s.ended) emit(s, sample_next(s, logits.row(sample_rows_[i]), logits.vocab), done, out);
  }
  for (auto& f : followers_) {
    sequence& s = *f.seq;
    s.prefilled = int32_t(s.req.prompt.size());
    s.position = s.prefilled;
    end_if_prompt_only(s, done, out);
    if (!s.ended)
      emit(s, sample_next(s, logits.row(sample_rows_[f.leader_row]), logits.vocab), done, out);
  }
  // Prompts now complete join the running set, in their order.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->prefill_done()) {
      running_.push_back(std::move(*it));
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  out.step_timings.push_back(
      step_timing{name_, prefill_rows > 0 ? step_kind::prefill : step_kind::decode, items_.size(),
                  size_t(prompt_tokens + decoded), size_t(computed), to_time_point(start),
                  std::chrono::nanoseconds(done - start)});
}

void executor_core::plan_static_prefill() {
  int32_t longest = 0;
  for (auto& s : waiting_) longest = std::max(longest, int32_t(s->req.prompt.size()));
  padded_prompts_.resize(waiting_.size());
  for (size_t i = 0; i < waiting_.size(); ++i) {
    auto& s = *waiting_[i];
    const int32_t n = int32_t(s.req.prompt.size());
    if (n < longest) {
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
    rows_.push_back({&s, true, true});
  }
}

void executor_core::plan_chunked_prefill(int64_t decode_rows, int64_t decode_attended) {
  // The planner's view of the waiting prompts, in order. A prompt equal to an earlier one's
  // (the choices of a request with n > 1) is not computed again: it waits for that one's prefill
  // to complete, then copies its KV-cache rows and samples from its logits with its own sampler.
  // A follower that reports its prompt's log-probabilities needs its own rows of logits.
  prompts_.clear();
  candidates_.clear();
  pending_followers_.clear();
  const bool shares = model_->copies_prefixes();
  for (auto& s : waiting_) {
    if (shares && s->prefilled == 0 && !s->req.params.prompt_logprobs) {
      auto leader = std::find_if(candidates_.begin(), candidates_.end(), [&](const sequence* l) {
        return l->req.prompt == s->req.prompt;
      });
      if (leader != candidates_.end()) {
        pending_followers_.push_back({s.get(), *leader});
        continue;
      }
    }
    prompts_.push_back({int64_t(s->req.prompt.size()), s->prefilled});
    candidates_.push_back(s.get());
  }
  const auto plan = planner_.plan(decode_rows, decode_attended, prompts_, costs_);
  for (const auto& chunk : plan.chunks) {
    sequence& s = *candidates_[chunk.index];
    items_.push_back({s.slot, int32_t(chunk.start), s.req.prompt.data() + chunk.start,
                      int32_t(chunk.count), -1, s.req.params.prompt_logprobs});
    rows_.push_back({&s, true, chunk.last});
  }
  // Followers join the step that completes their leader's prompt.
  for (const auto& f : pending_followers_) {
    auto leader = std::find_if(rows_.begin(), rows_.end(),
                               [&](const step_row& r) { return r.seq == f.leader; });
    if (leader != rows_.end() && leader->completes)
      followers_.push_back({f.seq, size_t(leader - rows_.begin())});
  }
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
  // Log-probabilities: of the very row the sampler drew from (processed), under its
  // settings.
  if (s.req.params.logprobs >= 0)
    s.scores = sampling::sampled_logprobs(logits, vocab, s.sampler.params(), token,
                                       std::min(s.req.params.logprobs, sampling::max_top_logprobs));
  return token;
}

namespace {

// A position's scores with each token's text in the context of `detokenizer`.
token_logprob describe(const sampling::token_scores& scores,
                       const tokenizers::incremental_detokenizer& detokenizer) {
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

void executor_core::score_prompt_chunk(sequence& s, const model::logits_view& logits,
                                       int32_t first_row, int32_t start, int32_t count) {
  const auto& prompt = s.req.prompt;
  const int32_t n = int32_t(prompt.size());
  const int32_t top_n = std::max(0, std::min(s.req.params.logprobs, sampling::max_top_logprobs));
  if (start == 0) {
    s.prompt_entries.clear();
    s.prompt_entries.reserve(prompt.size());
    // Texts as the prompt decodes: the space after BOS dropped, as decode_prompt does.
    s.prompt_detokenizer.emplace(tokenizer_, -1);
    // The first token follows nothing: no log-probability.
    s.prompt_entries.push_back({{prompt[0], std::numeric_limits<float>::quiet_NaN(),
                                 s.prompt_detokenizer->peek(prompt[0])},
                                {}});
    s.prompt_detokenizer->push(prompt[0]);
  }
  // Teacher-forced: token t under the raw distribution after tokens 0..t-1, i.e. the row of
  // token t - 1; the row of this chunk's last token scores the next chunk's first.
  for (int32_t t = start + 1; t <= start + count && t < n; ++t) {
    s.prompt_entries.push_back(describe(
        sampling::raw_logprobs(logits.row(first_row + (t - 1 - start)), logits.vocab, prompt[t],
                            top_n),
        *s.prompt_detokenizer));
    s.prompt_detokenizer->push(prompt[t]);
  }
}

void executor_core::emit(sequence& s, int32_t token, stamp now, step_output& out) {
  if (s.req.times.first_token == 0) s.req.times.first_token = now;
  s.token_times.push_back(to_time_point(now));
  // Log-probabilities: the texts in the context before this token.
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
  // min_tokens: stop strings that end in the min_tokens-th token or later count, as vLLM checks
  // them.
  if (s.generated == s.req.params.min_tokens) s.stops.arm();
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
