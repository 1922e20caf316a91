#include "pipeline/scheduler.hpp"

#include <algorithm>

namespace conveyor::pipeline {

scheduler::scheduler(int32_t slots, int32_t context, kv_cache_layout kv)
    : context_(context),
      kv_(kv),
      table_blocks_((context + kv.block_size - 1) / kv.block_size),
      pool_(kv.blocks, kv.block_size),
      free_slots_(slots) {}

void scheduler::set_max_batched_tokens(int32_t n) {
  auto options = planner_.options();
  options.max_prompt_tokens = n;
  planner_ = step_planner{options};
}

int32_t scheduler::free_slots() const {
  if (static_batch_ && has_work()) return 0;
  return free_slots_;
}

std::vector<request_id> scheduler::active_ids() const {
  std::vector<request_id> ids;
  for (const auto& s : waiting_) ids.push_back(s->req.id);
  for (const auto& s : running_)
    if (!s->ended) ids.push_back(s->req.id);
  return ids;
}

std::vector<sequence*> scheduler::sequences() const {
  std::vector<sequence*> all;
  all.reserve(waiting_.size() + running_.size());
  for (const auto& s : waiting_) all.push_back(s.get());
  for (const auto& s : running_) all.push_back(s.get());
  return all;
}

void scheduler::open_admission(bool static_batch) {
  if (!has_work()) static_batch_ = static_batch;
}

bool scheduler::has_slot_for(bool static_batch) const {
  if (free_slots_ == 0 || static_batch_ != static_batch) return false;
  return !static_batch || pool_.free_blocks() >= table_blocks_;
}

void scheduler::admit(std::unique_ptr<sequence> s, stamp now) {
  --free_slots_;
  s->req.times.admitted = now;
  // A static batch's member holds a whole context from the start: its padded prompt and every
  // token it may generate fit, and it never waits for a block.
  if (static_batch_) take_blocks(*s, context_);
  waiting_.push_back(std::move(s));
}

bool scheduler::cancel(request_id id) {
  for (auto& s : waiting_)
    if (s->req.id == id) return s->schedule.cancel_requested = true;
  for (auto& s : running_)
    if (s->req.id == id && !s->ended) return s->schedule.cancel_requested = true;
  return false;
}

std::vector<scheduled_end> scheduler::ends_at(stamp now) const {
  std::vector<scheduled_end> ends;
  for (sequence* s : sequences()) {
    if (s->ended) continue;
    if (s->schedule.cancel_requested)
      ends.push_back({s, outcome::cancelled, ec::cancelled, "request cancelled"});
    else if (s->req.deadline != 0 && now >= s->req.deadline)
      ends.push_back({s, outcome::expired, ec::expired,
                      "deadline passed after " + std::to_string(s->output.generated) + " tokens"});
  }
  return ends;
}

void scheduler::release(sequence& s) {
  release_blocks(s);
  ++free_slots_;
}

void scheduler::release_blocks(sequence& s) {
  // A release the pool refuses would be a bookkeeping error of this class; there is nothing
  // better to do with it than to go on with the blocks the pool does know.
  // Last block first: the pool evicts the least recently released first, so a prefix outlives
  // its tail, and a sequence that comes back finds the most of itself.
  for (auto it = s.schedule.blocks.rbegin(); it != s.schedule.blocks.rend(); ++it)
    (void)pool_.release(*it);
  s.schedule.blocks.clear();
  s.schedule.registered = 0;
}

void scheduler::release_ended() {
  // A static batch holds every slot until all of its members have ended.
  if (static_batch_) {
    bool all_ended = waiting_.empty();
    for (auto& s : running_) all_ended = all_ended && s->ended;
    if (!all_ended) return;
  }
  auto drop_ended = [&](auto& container) {
    for (auto it = container.begin(); it != container.end();) {
      if ((*it)->ended) {
        release(**it);
        it = container.erase(it);
      } else {
        ++it;
      }
    }
  };
  drop_ended(waiting_);
  drop_ended(running_);
}

void scheduler::release_all_ended() {
  const bool was_static = static_batch_;
  static_batch_ = false;
  release_ended();
  static_batch_ = was_static && has_work();
}

bool scheduler::take_blocks(sequence& s, int32_t positions) {
  auto& blocks = s.schedule.blocks;
  const auto needed = size_t((positions + kv_.block_size - 1) / kv_.block_size);
  while (blocks.size() < needed) {
    const auto id = pool_.allocate();
    if (!id) return false;
    blocks.push_back(*id);
  }
  return true;
}

sequence* scheduler::preemption_victim(const sequence& s) const {
  for (auto it = waiting_.rbegin(); it != waiting_.rend(); ++it)
    if (it->get() != &s && !(*it)->schedule.blocks.empty()) return it->get();
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    sequence* r = it->get();
    const bool preempted = std::find(preempted_.begin(), preempted_.end(), r) != preempted_.end();
    if (!preempted && !r->schedule.blocks.empty()) return r;
  }
  return nullptr;
}

void scheduler::preempt(sequence& s) {
  auto& state = s.schedule;
  const bool running = s.prefill_done() && !state.resuming;
  release_blocks(s);
  state.prefilled = 0;
  if (!running) return;  // still waiting: it prefills again
  // A running sequence: its prompt and the tokens it fed are computed again before it decodes
  // on, as the same numbers (the networks' rows do not depend on the pass), mostly from the
  // prefix cache where its blocks were entered.
  state.resuming = true;
  state.resume_tokens = s.req.prompt;
  state.resume_tokens.insert(state.resume_tokens.end(), state.fed.begin(), state.fed.end());
}

void scheduler::allocate_decode_blocks() {
  preempted_.clear();
  for (auto& owned : running_) {
    sequence& s = *owned;
    if (s.ended || s.schedule.position >= context_) continue;
    if (std::find(preempted_.begin(), preempted_.end(), &s) != preempted_.end()) continue;
    while (!take_blocks(s, s.schedule.position + 1)) {
      sequence* victim = preemption_victim(s);
      if (victim == nullptr) break;  // cannot happen: `s` itself holds blocks
      const bool running = victim->prefill_done() && !victim->schedule.resuming;
      preempt(*victim);
      if (running) preempted_.push_back(victim);
      if (victim == &s) break;
    }
  }
  // The preempted running sequences wait at the front, in their order, to be prefilled again.
  for (auto it = preempted_.rbegin(); it != preempted_.rend(); ++it) {
    auto pos = std::find_if(running_.begin(), running_.end(),
                            [&](const std::unique_ptr<sequence>& r) { return r.get() == *it; });
    waiting_.push_front(std::move(*pos));
    running_.erase(pos);
  }
}

void scheduler::look_up_prefix(sequence& s) {
  auto& state = s.schedule;
  if (!kv_.prefix_caching || s.req.params.prompt_logprobs) return;
  const auto& tokens = s.prefill_tokens();
  auto hit = pool_.match_prefix(tokens);
  // Never the whole prompt: its last token is computed for the logits it samples from.
  while (!hit.empty() && int64_t(hit.size()) * kv_.block_size >= int64_t(tokens.size())) {
    (void)pool_.release(hit.back());
    hit.pop_back();
  }
  state.blocks = std::move(hit);
  state.registered = int32_t(state.blocks.size());
  state.prefilled = state.registered * kv_.block_size;
  if (!state.looked_up) {
    state.looked_up = true;
    state.queried_tokens = int32_t(tokens.size());
    state.cached_tokens = state.prefilled;
  }
}

void scheduler::register_blocks(sequence& s, int32_t filled) {
  if (!kv_.prefix_caching || static_batch_) return;
  auto& state = s.schedule;
  const int32_t bs = kv_.block_size;
  std::vector<int32_t> tokens(static_cast<size_t>(bs));
  while ((state.registered + 1) * bs <= filled && state.registered < int32_t(state.blocks.size())) {
    const int32_t first = state.registered * bs;
    for (int32_t i = 0; i < bs; ++i) tokens[size_t(i)] = s.token_at(first + i);
    std::optional<int32_t> parent;
    if (state.registered > 0) parent = state.blocks[size_t(state.registered - 1)];
    (void)pool_.cache_full_block(state.blocks[size_t(state.registered)], parent, tokens);
    ++state.registered;
  }
}

const scheduled_step& scheduler::schedule() {
  // Sequences that ended before their prompt was complete (a static batch keeps such members
  // waiting past release_ended): their slots are free now.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->ended) {
      release(**it);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  // One forward pass for everything: the chunks of prompts, then one token of every sequence
  // already running. A static batch pads its prompts to the longest, and its ended members keep
  // their rows until the batch ends, as a padded batch does.
  auto& step = step_;
  step.items.clear();
  step.rows.clear();
  step.followers.clear();
  step.block_copies.clear();
  step.decode_rows = step.decode_attended = step.decoded = 0;
  if (!static_batch_) allocate_decode_blocks();
  auto decodes = [&](const sequence& s) {
    return s.schedule.position < context_ && (!s.ended || static_batch_);
  };
  for (auto& s : running_) {
    if (!decodes(*s)) continue;
    ++step.decode_rows;
    step.decode_attended += s->schedule.position + 1;
    if (!s->ended) ++step.decoded;
  }
  if (static_batch_) {
    plan_static_prefill();
  } else {
    plan_chunked_prefill();
    // Nothing can run while waiting prompts hold blocks that the first of them needs: the later
    // ones give theirs up and prefill again later (from the prefix cache, where they are).
    if (step.rows.empty() && step.decode_rows == 0 && waiting_.size() > 1) {
      for (auto it = std::next(waiting_.begin()); it != waiting_.end(); ++it) preempt(**it);
      plan_chunked_prefill();
    }
  }
  step.prefill_rows = step.rows.size();
  step.prompt_tokens = step.computed = 0;
  step.attended = step.decode_attended;
  for (size_t i = 0; i < step.prefill_rows; ++i) {
    auto& item = step.items[i];
    auto& row = step.rows[i];
    item.blocks = row.seq->schedule.blocks.data();
    step.computed += item.count;
    step.attended += step_planner::attended_by(item.start, item.count);
    // Padding is computed but not a real token.
    row.prompt_start = item.start;
    row.prompt_count = std::min(item.count, int32_t(row.seq->prefill_tokens().size()) - item.start);
    row.all_logits = item.all_logits;
    if (!row.resumes) step.prompt_tokens += row.prompt_count;
  }
  for (auto& s : running_) {
    if (!decodes(*s)) continue;
    step.items.push_back(
        {s->schedule.blocks.data(), s->schedule.position, &s->schedule.next_token, 1, -1});
    step_row row;
    row.seq = s.get();
    step.rows.push_back(row);
    ++step.computed;
  }
  // The rows of logits: an item with all_logits has a row per token.
  int32_t logits_row = 0;
  for (size_t i = 0; i < step.rows.size(); ++i) {
    const auto& item = step.items[i];
    auto& row = step.rows[i];
    row.first_logits_row = logits_row;
    row.sample_logits_row =
        item.all_logits ? logits_row + (item.logits_at < 0 ? item.count - 1 : item.logits_at)
                        : logits_row;
    logits_row += item.all_logits ? item.count : 1;
  }
  return step;
}

void scheduler::plan_static_prefill() {
  int32_t longest = 0;
  for (auto& s : waiting_) longest = std::max(longest, int32_t(s->req.prompt.size()));
  padded_prompts_.resize(waiting_.size());
  for (size_t i = 0; i < waiting_.size(); ++i) {
    auto& s = *waiting_[i];
    const auto& prompt = s.req.prompt;
    const int32_t n = int32_t(prompt.size());
    const bool all_logits = s.req.params.prompt_logprobs;
    if (n < longest) {
      // Right padding: the pad tokens sit after the prompt, where the causal mask keeps them
      // from changing the prompt's logits; decoding later overwrites their cache rows.
      auto& p = padded_prompts_[i];
      p.assign(prompt.begin(), prompt.end());
      p.resize(size_t(std::min(longest, context_)), prompt.back());
      step_.items.push_back({nullptr, 0, p.data(), int32_t(p.size()), n - 1, all_logits});
    } else {
      step_.items.push_back({nullptr, 0, prompt.data(), n, -1, all_logits});
    }
    step_row row;
    row.seq = &s;
    row.prefill = row.completes = true;
    step_.rows.push_back(row);
  }
}

void scheduler::plan_chunked_prefill() {
  step_.items.resize(0);
  step_.rows.resize(0);
  step_.followers.clear();
  step_.block_copies.clear();
  // The planner's view of the waiting prompts, in order. A prompt equal to an earlier one's
  // (the choices of a request with n > 1) is not computed again: it waits for that one's prefill
  // to complete, then shares its blocks and samples from its logits with its own sampler. A
  // follower that reports its prompt's log-probabilities needs its own rows of logits.
  // Any other prompt without blocks starts from its longest cached prefix.
  prompts_.clear();
  candidates_.clear();
  pending_followers_.clear();
  for (auto& s : waiting_) {
    auto& state = s->schedule;
    const bool fresh = state.prefilled == 0 && state.blocks.empty();
    if (fresh && !state.resuming && !s->req.params.prompt_logprobs) {
      auto leader = std::find_if(candidates_.begin(), candidates_.end(), [&](const sequence* l) {
        return !l->schedule.resuming && l->req.prompt == s->req.prompt;
      });
      if (leader != candidates_.end()) {
        pending_followers_.push_back({s.get(), *leader});
        continue;
      }
    }
    if (fresh) look_up_prefix(*s);
    prompts_.push_back({int64_t(s->prefill_tokens().size()), state.prefilled});
    candidates_.push_back(s.get());
  }
  const auto plan = planner_.plan(step_.decode_rows, step_.decode_attended, prompts_, costs_);
  for (const auto& chunk : plan.chunks) {
    sequence& s = *candidates_[chunk.index];
    const auto start = int32_t(chunk.start);
    int32_t end = start + int32_t(chunk.count);
    // As far as the blocks it can get reach: a prompt waits for blocks, never fails.
    if (!take_blocks(s, end))
      end = std::min(end, int32_t(s.schedule.blocks.size()) * kv_.block_size);
    if (end <= start) continue;
    const auto& tokens = s.prefill_tokens();
    const bool resumes = s.schedule.resuming;
    step_.items.push_back({nullptr, start, tokens.data() + start, end - start, -1,
                           s.req.params.prompt_logprobs && !resumes});
    step_row row;
    row.seq = &s;
    row.prefill = true;
    row.completes = end == int32_t(tokens.size());
    row.resumes = resumes;
    step_.rows.push_back(row);
  }
  // Followers join the step that completes their leader's prompt: they share its full blocks
  // and continue in a copy of its last, partly filled one (without a free block for that copy,
  // a follower stays waiting and later prefills alone).
  const int32_t bs = kv_.block_size;
  for (const auto& f : pending_followers_) {
    auto leader = std::find_if(step_.rows.begin(), step_.rows.end(),
                               [&](const step_row& r) { return r.seq == f.leader; });
    if (leader == step_.rows.end() || !leader->completes) continue;
    const auto& shared = f.leader->schedule.blocks;
    const int32_t length = int32_t(f.seq->req.prompt.size());
    const int32_t full = length / bs;
    std::optional<int32_t> copy;
    if (length % bs != 0) {
      copy = pool_.allocate();
      if (!copy) continue;
      step_.block_copies.emplace_back(shared[size_t(full)], *copy);
    }
    auto& blocks = f.seq->schedule.blocks;
    for (int32_t b = 0; b < full; ++b) {
      (void)pool_.retain(shared[size_t(b)]);
      blocks.push_back(shared[size_t(b)]);
    }
    if (copy) blocks.push_back(*copy);
    step_.followers.push_back({f.seq, size_t(leader - step_.rows.begin())});
  }
}

void scheduler::advance(const scheduled_step& step, double ms) {
  costs_.observe(step.shape(), ms);
  for (const auto& row : step.rows) {
    sequence& seq = *row.seq;
    auto& s = seq.schedule;
    if (!row.prefill) {
      if (!static_batch_) s.fed.push_back(s.next_token);
      ++s.position;
      register_blocks(seq, s.position);
      continue;
    }
    s.prefilled = row.prompt_start + row.prompt_count;
    register_blocks(seq, s.prefilled);
    if (!row.completes) continue;
    if (row.resumes) {
      // Back where it was preempted: it decodes on from `position` with `next_token`.
      s.resuming = false;
      s.resume_tokens.clear();
      s.prefilled = int32_t(seq.req.prompt.size());
    } else {
      s.position = int32_t(seq.req.prompt.size());
    }
  }
  for (const auto& f : step.followers) {
    auto& s = f.seq->schedule;
    s.prefilled = int32_t(f.seq->req.prompt.size());
    s.position = s.prefilled;
    // Its full blocks are its leader's, entered in the cache (where caching is on) just above.
    s.registered =
        std::min(step.rows[f.leader_row].seq->schedule.registered, s.prefilled / kv_.block_size);
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
}

}  // namespace conveyor::pipeline
