#include "pipeline/output_processor.hpp"

#include <algorithm>
#include <limits>

namespace conveyor::pipeline {

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

output_processor::output_processor(std::shared_ptr<const tokenizers::tokenizer> tokenizer,
                                   int32_t context, std::vector<int32_t> model_end_ids)
    : tokenizer_(std::move(tokenizer)),
      context_(context),
      model_end_ids_(std::move(model_end_ids)) {}

std::vector<int32_t> output_processor::end_ids_of(const sampling::sampling_params& params) const {
  std::vector<int32_t> ids = params.stop_token_ids;
  if (!params.ignore_eos) ids.insert(ids.end(), model_end_ids_.begin(), model_end_ids_.end());
  return ids;
}

output_state output_processor::start(const sequence_request& req) const {
  // The first token follows the prompt's last (BOS alone for an empty prompt).
  const int32_t preceding = req.prompt.empty() ? -1 : req.prompt.back();
  // Before min_tokens, stop strings do not end the sequence: the matcher is armed with the
  // min_tokens-th token (emit), and finds a stop string that began before it.
  return output_state{end_ids_of(req.params),
                      tokenizers::incremental_detokenizer{tokenizer_, preceding},
                      sampling::stop_string_matcher{req.params.stop, req.params.min_tokens <= 0}};
}

bool output_processor::is_end_token(const sequence& s, int32_t token) {
  const auto& ids = s.output.end_ids;
  return std::find(ids.begin(), ids.end(), token) != ids.end();
}

token_chunk& output_processor::chunk_of(const sequence& s, step_output& out) {
  if (out.chunks.empty() || out.chunks.back().id != s.req.id)
    out.chunks.push_back(token_chunk{s.req.id, {}, {}, {}, {}});
  return out.chunks.back();
}

void output_processor::score_prompt_chunk(sequence& s, const model::logits_view& logits,
                                          int32_t first_row, int32_t start, int32_t count) {
  const auto& prompt = s.req.prompt;
  const int32_t n = int32_t(prompt.size());
  const int32_t top_n = std::max(0, std::min(s.req.params.logprobs, sampling::max_top_logprobs));
  auto& entries = s.output.prompt_entries;
  auto& detokenizer = s.output.prompt_detokenizer;
  if (start == 0) {
    entries.clear();
    entries.reserve(prompt.size());
    // Texts as the prompt decodes: the space after BOS dropped, as decode_prompt does.
    detokenizer.emplace(tokenizer_, -1);
    // The first token follows nothing: no log-probability.
    entries.push_back(
        {{prompt[0], std::numeric_limits<float>::quiet_NaN(), detokenizer->peek(prompt[0])}, {}});
    detokenizer->push(prompt[0]);
  }
  // Teacher-forced: token t under the raw distribution after tokens 0..t-1, i.e. the row of
  // token t - 1; the row of this chunk's last token scores the next chunk's first.
  for (int32_t t = start + 1; t <= start + count && t < n; ++t) {
    entries.push_back(describe(sampling::raw_logprobs(logits.row(first_row + (t - 1 - start)),
                                                      logits.vocab, prompt[t], top_n),
                               *detokenizer));
    detokenizer->push(prompt[t]);
  }
}

void output_processor::complete_prompt(sequence& s, stamp now, step_output& out) {
  if (s.ended) return;
  if (s.req.params.prompt_logprobs)
    chunk_of(s, out).prompt_logprobs = std::move(s.output.prompt_entries);
  // max_tokens 0 (echo): the prompt was all that was asked for.
  if (s.req.params.max_tokens != 0) return;
  s.req.times.first_token = now;
  finish(s, outcome::finished, finish_reason::length, ec::none, {}, out);
}

void output_processor::emit(sequence& s, sampled_token picked, stamp now, step_output& out) {
  auto& o = s.output;
  if (s.req.times.first_token == 0) s.req.times.first_token = now;
  o.token_times.push_back(to_time_point(now));
  // Log-probabilities: the texts in the context before this token.
  std::optional<token_logprob> scored;
  if (picked.scores) scored = describe(*picked.scores, o.detokenizer);
  if (is_end_token(s, picked.token)) {
    // Reported as vLLM does: the end token's log-probability comes last, with no text.
    if (scored) chunk_of(s, out).logprobs.push_back(std::move(*scored));
    finish(s, outcome::finished, finish_reason::stop, ec::none, {}, out);
    return;
  }
  ++o.generated;
  // min_tokens: stop strings that end in the min_tokens-th token or later count, as vLLM checks
  // them.
  if (o.generated == s.req.params.min_tokens) o.stops.arm();
  std::string text = o.stops.push(o.detokenizer.push(picked.token));
  // The token that completes a stop string keeps its log-probability, though its text is cut.
  if (!text.empty() || !o.stops.stopped() || scored) {
    auto& chunk = chunk_of(s, out);
    chunk.text += text;
    chunk.tokens.push_back(picked.token);
    if (scored) chunk.logprobs.push_back(std::move(*scored));
  }
  if (o.stops.stopped() || picked.format_complete) {
    finish(s, outcome::finished, finish_reason::stop, ec::none, {}, out);
  } else if (o.generated >= s.req.params.max_tokens || s.schedule.position + 1 >= context_) {
    finish(s, outcome::finished, finish_reason::length, ec::none, {}, out);
  }
}

void output_processor::finish(sequence& s, outcome how, finish_reason reason, ec code,
                              std::string message, step_output& out) {
  if (s.ended) return;
  s.ended = true;
  auto& o = s.output;
  request_result r;
  r.id = s.req.id;
  r.how = how;
  r.reason = reason;
  r.code = code;
  r.message = std::move(message);
  r.prompt_tokens = int32_t(s.req.prompt.size());
  r.completion_tokens = o.generated;
  r.cache_queried_tokens = s.schedule.queried_tokens;
  r.cached_tokens = s.schedule.cached_tokens;
  r.times = s.req.times;
  r.times.finished = clock_();
  // Text still held back (an incomplete character, a possible stop string) ends the answer,
  // unless a stop string matched: then what follows it is dropped.
  if (how == outcome::finished && !o.stops.stopped()) {
    r.tail = o.stops.push(o.detokenizer.flush());
    r.tail += o.stops.flush();
  }
  request_timing t = timing_of(r);
  t.token_times = std::move(o.token_times);
  out.request_timings.push_back(std::move(t));
  out.results.push_back(std::move(r));
}

}  // namespace conveyor::pipeline
