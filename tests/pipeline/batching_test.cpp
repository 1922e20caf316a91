// The waiting queue and the three batching policies, driven without actors.
#include <gtest/gtest.h>

#include "pipeline/batching.hpp"

using namespace conveyor;
using namespace conveyor::pipeline;

namespace {

sequence_request make(request_id id, int32_t prompt_len, int32_t priority = 0,
                      int32_t max_tokens = 10, stamp queued = 1, stamp deadline = 0) {
  sequence_request r;
  r.id = id;
  r.prompt.assign(size_t(prompt_len), 5);
  r.params.max_tokens = max_tokens;
  r.priority = priority;
  r.times.queued = queued;
  r.deadline = deadline;
  return r;
}

std::vector<request_id> ids(const std::vector<sequence_request>& rs) {
  std::vector<request_id> out;
  for (auto& r : rs) out.push_back(r.id);
  return out;
}

}  // namespace

TEST(waiting_queue, priority_first_then_fifo) {
  waiting_queue q(100, 100000);
  ASSERT_FALSE(q.push(make(1, 3, 0)));
  ASSERT_FALSE(q.push(make(2, 3, 5)));
  ASSERT_FALSE(q.push(make(3, 3, 0)));
  ASSERT_FALSE(q.push(make(4, 3, 5)));
  std::vector<request_id> order;
  while (!q.empty()) order.push_back(q.pop_front().id);
  EXPECT_EQ(order, (std::vector<request_id>{2, 4, 1, 3}));
}

TEST(waiting_queue, bounded_by_requests_and_tokens) {
  waiting_queue q(2, 100);
  EXPECT_FALSE(q.push(make(1, 10, 0, 10)));
  EXPECT_EQ(q.tokens(), 20);
  auto by_tokens = q.push(make(2, 70, 0, 20));
  ASSERT_TRUE(by_tokens);
  EXPECT_EQ(*by_tokens, "queue full: 20 tokens waiting, this request needs 90 (max 100)");
  EXPECT_FALSE(q.push(make(3, 10, 0, 10)));
  auto by_count = q.push(make(4, 1, 0, 1));
  ASSERT_TRUE(by_count);
  EXPECT_EQ(*by_count, "queue full: 2 requests waiting (max 2)");
  ASSERT_TRUE(q.remove(1));
  EXPECT_FALSE(q.remove(1));
  EXPECT_EQ(q.tokens(), 20);
  EXPECT_FALSE(q.push(make(4, 1, 0, 1)));
}

TEST(waiting_queue, expire_removes_only_passed_deadlines) {
  waiting_queue q(10, 1000);
  q.push(make(1, 2, 0, 1, 1, 100));
  q.push(make(2, 2, 0, 1, 1, 0));
  q.push(make(3, 2, 0, 1, 1, 300));
  EXPECT_EQ(q.earliest_deadline(), 100);
  EXPECT_EQ(ids(q.expire(200)), (std::vector<request_id>{1}));
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.earliest_deadline(), 300);
}

TEST(policy, sequential_gives_one_to_an_idle_executor) {
  auto p = make_policy({policy_kind::sequential});
  waiting_queue q(10, 1000);
  q.push(make(1, 2));
  q.push(make(2, 2));
  EXPECT_TRUE(p->select(q, {4, 1}, 0).empty());
  EXPECT_EQ(ids(p->select(q, {4, 0}, 0)), (std::vector<request_id>{1}));
  EXPECT_FALSE(p->static_batches());
}

TEST(policy, seed_sorts_longest_first_and_waits_for_a_full_batch) {
  batcher_options o;
  o.policy = policy_kind::seed;
  o.max_batch_size = 3;
  o.max_wait_s = 0.001;  // 1 ms = 1'000'000 ns
  auto p = make_policy(o);
  waiting_queue q(10, 1000);
  q.push(make(1, 2, 0, 10, 1000));
  q.push(make(2, 9, 0, 10, 1000));
  // Two waiting, batch size 3: not yet, until the oldest has waited max_wait.
  EXPECT_TRUE(p->select(q, {8, 0}, 2000).empty());
  EXPECT_EQ(p->retry_at(q, 2000), 1000 + 1'000'000);
  EXPECT_EQ(ids(p->select(q, {8, 0}, 1'001'000)), (std::vector<request_id>{2, 1}));
  q.push(make(3, 1));
  q.push(make(4, 7));
  q.push(make(5, 4));
  q.push(make(6, 8));
  // A busy executor gets nothing; an idle one the three longest.
  EXPECT_TRUE(p->select(q, {8, 2}, 5).empty());
  EXPECT_EQ(ids(p->select(q, {8, 0}, 5)), (std::vector<request_id>{6, 4, 5}));
  EXPECT_TRUE(p->static_batches());
}

TEST(policy, continuous_fills_free_slots_within_the_token_budget) {
  batcher_options o;
  o.policy = policy_kind::continuous;
  o.max_num_seqs = 4;
  o.max_batched_tokens = 20;
  auto p = make_policy(o);
  waiting_queue q(10, 1000);
  for (request_id i = 1; i <= 6; ++i) q.push(make(i, 8));
  // 3 running of at most 4: one more.
  EXPECT_EQ(ids(p->select(q, {10, 3}, 0)), (std::vector<request_id>{1}));
  // Idle: 4 seats but only 20 prompt tokens per step: two of 8.
  EXPECT_EQ(ids(p->select(q, {10, 0}, 0)), (std::vector<request_id>{2, 3}));
  // A prompt longer than the whole budget still goes alone.
  q.push(make(9, 50, 9));
  EXPECT_EQ(ids(p->select(q, {10, 0}, 0)), (std::vector<request_id>{9}));
  EXPECT_EQ(ids(p->select(q, {1, 0}, 0)), (std::vector<request_id>{4}));
}
