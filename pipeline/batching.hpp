// The batcher's plain parts: the bounded waiting queue and the batching policies.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "pipeline/request.hpp"

namespace conveyor::pipeline {

/// The batching policies (see docs/architecture.md).
enum class policy_kind : uint8_t { sequential, seed, continuous };

/// Parses "sequential", "seed" or "continuous".
std::optional<policy_kind> parse_policy(const std::string& name);

/// Name of a policy.
const char* to_string(policy_kind x);

/// What the batcher needs from the configuration.
struct batcher_options {
  policy_kind policy = policy_kind::continuous;
  /// seed: requests per static batch.
  int32_t max_batch_size = 16;
  /// seed: a partial batch leaves after its oldest request waited this long.
  double max_wait_s = 0.005;
  /// continuous: sequences running at once on one executor.
  int32_t max_num_seqs = 16;
  /// continuous: the most prompt tokens handed to an executor at a time (at least one request).
  int32_t max_batched_tokens = 2048;
  /// Bounds of the waiting queue: requests, and tokens (prompt + max_tokens of each).
  int64_t max_queued_requests = 1024;
  int64_t max_queued_tokens = 1 << 20;
};

/// Requests waiting for an executor: highest priority first, first come first served within a
/// level; bounded by count and by tokens.
class waiting_queue {
 public:
  waiting_queue(int64_t max_requests, int64_t max_tokens);

  /// Adds a request, or says why not (the queue is full by requests or by tokens).
  std::optional<std::string> push(sequence_request req);

  /// Removes a request by id.
  std::optional<sequence_request> remove(request_id id);

  /// Removes and returns every request whose deadline is at or before `now`.
  std::vector<sequence_request> expire(stamp now);

  /// Removes and returns everything.
  std::vector<sequence_request> drain();

  /// Removes the request at the front.
  sequence_request pop_front();

  /// The request at the front (the queue must not be empty).
  const sequence_request& front() const { return by_order_.begin()->second; }

  /// Requests in priority order, front first (valid until the next change).
  std::vector<const sequence_request*> in_order() const;

  bool empty() const { return by_order_.empty(); }
  size_t size() const { return by_order_.size(); }
  int64_t tokens() const { return tokens_; }
  /// The earliest `queued` stamp of all waiting requests (0 when empty).
  stamp oldest_queued() const;
  /// The earliest deadline of all waiting requests (0 when none).
  stamp earliest_deadline() const;

 private:
  // Ordered by (priority descending, sequence number ascending).
  using key = std::pair<int64_t, uint64_t>;
  std::map<key, sequence_request> by_order_;
  std::unordered_map<request_id, key> keys_;
  // Indexes that keep expire(), oldest_queued() and earliest_deadline() logarithmic.
  std::set<std::pair<stamp, request_id>> deadlines_;
  std::set<std::pair<stamp, request_id>> queued_at_;
  int64_t max_requests_;
  int64_t max_tokens_;
  int64_t tokens_ = 0;
  uint64_t next_sequence_ = 0;
};

/// What a policy knows of the executor asking for work.
struct executor_view {
  int32_t free_slots = 0;
  int32_t active = 0;
};

/// Whether the executor asking for work may take a request (prefix routing); an empty filter
/// takes any.
using request_filter = std::function<bool(const sequence_request&)>;

/// A batching policy: picks the requests an executor gets when it asks for work.
class batching_policy {
 public:
  virtual ~batching_policy() = default;

  /// Removes from `queue` and returns the requests for this executor; may return none. The
  /// continuous policy takes, in queue order, only requests that `eligible` lets this executor
  /// take (the others wait for another executor); the static policies take any.
  virtual std::vector<sequence_request> select(waiting_queue& queue, const executor_view& exec,
                                               stamp now, const request_filter& eligible = {}) = 0;

  /// When `select` gave nothing although requests wait: when to ask again (0: only when
  /// something changes).
  virtual stamp retry_at(const waiting_queue&, stamp) const { return 0; }

  /// True when the executor runs each selection as one static batch to completion.
  virtual bool static_batches() const { return false; }

  /// The policy's name.
  virtual policy_kind kind() const = 0;
};

/// Makes the policy the options name.
std::unique_ptr<batching_policy> make_policy(const batcher_options& options);

}  // namespace conveyor::pipeline
