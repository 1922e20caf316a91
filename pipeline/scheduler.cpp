#include "pipeline/scheduler.hpp"

#include <algorithm>

namespace conveyor::pipeline {

scheduler::scheduler(int32_t slots, int32_t context, bool copies_prefixes)
    : context_(context), copies_prefixes_(copies_prefixes) {
  for (int32_t s = slots - 1; s >= 0; --s) free_slots_.push_back(s);
}

void scheduler::set_max_batched_tokens(int32_t n) {
  auto options = planner_.options();
  options.max_prompt_tokens = n;
  planner_ = step_planner{options};
}

int32_t scheduler::free_slots() const {
  if (static_batch_ && has_work()) return 0;
  return static_cast<int32_t>(free_slots_.size());
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
  return !free_slots_.empty() && static_batch_ == static_batch;
}

void scheduler::admit(std::unique_ptr<sequence> s, stamp now) {
  s->schedule.slot = free_slots_.back();
  free_slots_.pop_back();
  s->req.times.admitted = now;
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

void scheduler::release_ended() {
  // A static batch holds every slot until all of its members have ended.
  if (static_batch_) {
    bool all_ended = waiting_.empty();
    for (auto& s : running_) all_ended = all_ended && s->ended;
    if (!all_ended) return;
  }
  auto release = [&](auto& container) {
    for (auto it = container.begin(); it != container.end();) {
      if ((*it)->ended) {
        free_slots_.push_back((*it)->schedule.slot);
        it = container.erase(it);
      } else {
        ++it;
      }
    }
  };
  release(waiting_);
  release(running_);
}

void scheduler::release_all_ended() {
  const bool was_static = static_batch_;
  static_batch_ = false;
  release_ended();
  static_batch_ = was_static && has_work();
}

const scheduled_step& scheduler::schedule() {
  // Sequences that ended before their prompt was complete (a static batch keeps such members
  // waiting past release_ended): their slots are free now.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->ended) {
      free_slots_.push_back((*it)->schedule.slot);
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
  step.decode_rows = step.decode_attended = step.decoded = 0;
  auto decodes = [&](const sequence& s) {
    return s.schedule.position < context_ && (!s.ended || static_batch_);
  };
  for (auto& s : running_) {
    if (!decodes(*s)) continue;
    ++step.decode_rows;
    step.decode_attended += s->schedule.position + 1;
    if (!s->ended) ++step.decoded;
  }
  if (static_batch_)
    plan_static_prefill();
  else
    plan_chunked_prefill();
  step.prefill_rows = step.rows.size();
  step.prompt_tokens = step.computed = 0;
  step.attended = step.decode_attended;
  for (size_t i = 0; i < step.prefill_rows; ++i) {
    const auto& item = step.items[i];
    auto& row = step.rows[i];
    step.computed += item.count;
    step.attended += step_planner::attended_by(item.start, item.count);
    // Padding is computed but not a real token.
    row.prompt_start = item.start;
    row.prompt_count = std::min(item.count, int32_t(row.seq->req.prompt.size()) - item.start);
    row.all_logits = item.all_logits;
    step.prompt_tokens += row.prompt_count;
  }
  for (auto& s : running_) {
    if (!decodes(*s)) continue;
    step.items.push_back({s->schedule.slot, s->schedule.position, &s->schedule.next_token, 1, -1});
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
      step_.items.push_back({s.schedule.slot, 0, p.data(), int32_t(p.size()), n - 1, all_logits});
    } else {
      step_.items.push_back({s.schedule.slot, 0, prompt.data(), n, -1, all_logits});
    }
    step_row row;
    row.seq = &s;
    row.prefill = row.completes = true;
    step_.rows.push_back(row);
  }
}

void scheduler::plan_chunked_prefill() {
  // The planner's view of the waiting prompts, in order. A prompt equal to an earlier one's
  // (the choices of a request with n > 1) is not computed again: it waits for that one's prefill
  // to complete, then copies its KV-cache rows and samples from its logits with its own sampler.
  // A follower that reports its prompt's log-probabilities needs its own rows of logits.
  prompts_.clear();
  candidates_.clear();
  pending_followers_.clear();
  for (auto& s : waiting_) {
    if (copies_prefixes_ && s->schedule.prefilled == 0 && !s->req.params.prompt_logprobs) {
      auto leader = std::find_if(candidates_.begin(), candidates_.end(),
                                 [&](const sequence* l) { return l->req.prompt == s->req.prompt; });
      if (leader != candidates_.end()) {
        pending_followers_.push_back({s.get(), *leader});
        continue;
      }
    }
    prompts_.push_back({int64_t(s->req.prompt.size()), s->schedule.prefilled});
    candidates_.push_back(s.get());
  }
  const auto plan = planner_.plan(step_.decode_rows, step_.decode_attended, prompts_, costs_);
  for (const auto& chunk : plan.chunks) {
    sequence& s = *candidates_[chunk.index];
    step_.items.push_back({s.schedule.slot, int32_t(chunk.start), s.req.prompt.data() + chunk.start,
                           int32_t(chunk.count), -1, s.req.params.prompt_logprobs});
    step_row row;
    row.seq = &s;
    row.prefill = true;
    row.completes = chunk.last;
    step_.rows.push_back(row);
  }
  // Followers join the step that completes their leader's prompt.
  for (const auto& f : pending_followers_) {
    auto leader = std::find_if(step_.rows.begin(), step_.rows.end(),
                               [&](const step_row& r) { return r.seq == f.leader; });
    if (leader != step_.rows.end() && leader->completes)
      step_.followers.push_back({f.seq, size_t(leader - step_.rows.begin())});
  }
}

void scheduler::advance(const scheduled_step& step, double ms) {
  costs_.observe(step.shape(), ms);
  for (const auto& row : step.rows) {
    auto& s = row.seq->schedule;
    if (!row.prefill) {
      ++s.position;
      continue;
    }
    s.prefilled = row.prompt_start + row.prompt_count;
    if (row.completes) s.position = int32_t(row.seq->req.prompt.size());
  }
  for (const auto& f : step.followers) {
    auto& s = f.seq->schedule;
    s.prefilled = int32_t(f.seq->req.prompt.size());
    s.position = s.prefilled;
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
