#include "pipeline/batching.hpp"

#include <algorithm>
#include <limits>

namespace conveyor::pipeline {

std::optional<policy_kind> parse_policy(const std::string& name) {
  if (name == "sequential") return policy_kind::sequential;
  if (name == "seed") return policy_kind::seed;
  if (name == "continuous") return policy_kind::continuous;
  return std::nullopt;
}

const char* to_string(policy_kind x) {
  switch (x) {
    case policy_kind::sequential:
      return "sequential";
    case policy_kind::seed:
      return "seed";
    case policy_kind::continuous:
      return "continuous";
  }
  return "unknown";
}

// -- waiting_queue ------------------------------------------------------------------------------

waiting_queue::waiting_queue(int64_t max_requests, int64_t max_tokens)
    : max_requests_(max_requests), max_tokens_(max_tokens) {}

std::optional<std::string> waiting_queue::push(sequence_request req) {
  if (int64_t(by_order_.size()) >= max_requests_)
    return "queue full: " + std::to_string(by_order_.size()) + " requests waiting (max " +
           std::to_string(max_requests_) + ")";
  const int64_t cost = req.token_cost();
  if (tokens_ + cost > max_tokens_)
    return "queue full: " + std::to_string(tokens_) + " tokens waiting, this request needs " +
           std::to_string(cost) + " (max " + std::to_string(max_tokens_) + ")";
  req.sequence_number = next_sequence_++;
  key k{-int64_t(req.priority), req.sequence_number};
  keys_[req.id] = k;
  tokens_ += cost;
  if (req.deadline != 0) deadlines_.emplace(req.deadline, req.id);
  queued_at_.emplace(req.times.queued, req.id);
  by_order_.emplace(k, std::move(req));
  return std::nullopt;
}

std::optional<sequence_request> waiting_queue::remove(request_id id) {
  auto it = keys_.find(id);
  if (it == keys_.end()) return std::nullopt;
  auto node = by_order_.extract(it->second);
  keys_.erase(it);
  const auto& req = node.mapped();
  tokens_ -= req.token_cost();
  if (req.deadline != 0) deadlines_.erase({req.deadline, id});
  queued_at_.erase({req.times.queued, id});
  return std::move(node.mapped());
}

std::vector<sequence_request> waiting_queue::expire(stamp now) {
  std::vector<request_id> ids;
  for (auto it = deadlines_.begin(); it != deadlines_.end() && it->first <= now; ++it)
    ids.push_back(it->second);
  std::vector<sequence_request> out;
  for (auto id : ids) out.push_back(*remove(id));
  return out;
}

std::vector<sequence_request> waiting_queue::drain() {
  std::vector<sequence_request> out;
  while (!empty()) out.push_back(pop_front());
  return out;
}

sequence_request waiting_queue::pop_front() {
  return *remove(by_order_.begin()->second.id);
}

std::vector<const sequence_request*> waiting_queue::in_order() const {
  std::vector<const sequence_request*> out;
  out.reserve(by_order_.size());
  for (const auto& [k, r] : by_order_) out.push_back(&r);
  return out;
}

stamp waiting_queue::oldest_queued() const {
  return queued_at_.empty() ? 0 : queued_at_.begin()->first;
}

stamp waiting_queue::earliest_deadline() const {
  return deadlines_.empty() ? 0 : deadlines_.begin()->first;
}

// -- policies -----------------------------------------------------------------------------------

namespace {

/// One request at a time per executor: the baseline.
class sequential_policy final : public batching_policy {
 public:
  std::vector<sequence_request> select(waiting_queue& q, const executor_view& e, stamp,
                                       const request_filter&) override {
    std::vector<sequence_request> out;
    if (e.active == 0 && e.free_slots > 0 && !q.empty()) out.push_back(q.pop_front());
    return out;
  }
  policy_kind kind() const override { return policy_kind::sequential; }
};

/// The article's dynamic batcher: when an executor is idle, sort the waiting requests by prompt
/// length (longest first), take up to max_batch_size, pad to the longest and run the batch to
/// completion. A partial batch leaves once its oldest request has waited max_wait.
class seed_policy final : public batching_policy {
 public:
  explicit seed_policy(const batcher_options& o) : options_(o) {}

  std::vector<sequence_request> select(waiting_queue& q, const executor_view& e, stamp now,
                                       const request_filter&) override {
    std::vector<sequence_request> out;
    if (e.active != 0 || e.free_slots <= 0 || q.empty()) return out;
    const size_t n = size_t(std::min(options_.max_batch_size, e.free_slots));
    if (q.size() < n && now < flush_time(q)) return out;
    auto order = q.in_order();
    std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) {
      if (a->priority != b->priority) return a->priority > b->priority;
      return a->prompt.size() > b->prompt.size();
    });
    std::vector<request_id> ids;
    for (size_t i = 0; i < order.size() && i < n; ++i) ids.push_back(order[i]->id);
    for (auto id : ids) out.push_back(*q.remove(id));
    return out;
  }

  stamp retry_at(const waiting_queue& q, stamp) const override {
    return q.empty() ? 0 : flush_time(q);
  }

  bool static_batches() const override { return true; }
  policy_kind kind() const override { return policy_kind::seed; }

 private:
  stamp flush_time(const waiting_queue& q) const {
    return q.oldest_queued() + stamp(options_.max_wait_s * 1e9);
  }
  batcher_options options_;
};

/// Iteration-level batching: sequences join whenever the executor has free slots and the step
/// has token budget, and leave the moment they end (the executor frees their slots).
class continuous_policy final : public batching_policy {
 public:
  explicit continuous_policy(const batcher_options& o) : options_(o) {}

  std::vector<sequence_request> select(waiting_queue& q, const executor_view& e, stamp,
                                       const request_filter& eligible) override {
    std::vector<sequence_request> out;
    int32_t room = std::min(e.free_slots, options_.max_num_seqs - e.active);
    int64_t budget = options_.max_batched_tokens;
    if (!eligible) {
      while (room > 0 && !q.empty()) {
        const int64_t n = int64_t(q.front().prompt.size());
        if (!out.empty() && n > budget) break;
        budget -= n;
        --room;
        out.push_back(q.pop_front());
      }
      return out;
    }
    // In queue order, the requests this executor may take; the others stay for theirs.
    std::vector<request_id> picked;
    for (const sequence_request* r : q.in_order()) {
      if (room == 0) break;
      if (!eligible(*r)) continue;
      const int64_t n = int64_t(r->prompt.size());
      if (!picked.empty() && n > budget) break;
      budget -= n;
      --room;
      picked.push_back(r->id);
    }
    for (request_id id : picked) out.push_back(*q.remove(id));
    return out;
  }
  policy_kind kind() const override { return policy_kind::continuous; }

 private:
  batcher_options options_;
};

}  // namespace

std::unique_ptr<batching_policy> make_policy(const batcher_options& options) {
  switch (options.policy) {
    case policy_kind::sequential:
      return std::make_unique<sequential_policy>();
    case policy_kind::seed:
      return std::make_unique<seed_policy>(options);
    case policy_kind::continuous:
      return std::make_unique<continuous_policy>(options);
  }
  return nullptr;
}

}  // namespace conveyor::pipeline
