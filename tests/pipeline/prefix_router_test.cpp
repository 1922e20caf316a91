// The prefix router: prompts that begin alike map to one executor, short prompts to none, keys
// stay put when another executor leaves, and a much busier preferred executor gives its
// requests up. And the continuous policy taking only what the router lets an executor take.
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline/batching.hpp"
#include "pipeline/prefix_router.hpp"

using namespace conveyor;
using namespace conveyor::pipeline;

namespace {

// A prompt of `n` tokens from `rng`, after `prefix`.
std::vector<int32_t> prompt_after(const std::vector<int32_t>& prefix, int32_t n,
                                  std::mt19937& rng) {
  auto p = prefix;
  for (int32_t i = 0; i < n; ++i) p.push_back(int32_t(rng() % 32000));
  return p;
}

}  // namespace

TEST(prefix_router, prompts_that_begin_alike_go_to_one_executor) {
  prefix_router router;
  EXPECT_EQ(router.preferred(std::vector<int32_t>(100, 5)), std::nullopt) << "no executor yet";
  for (uint64_t e : {11, 12, 13, 14}) router.add(e);
  std::mt19937 rng(3);
  const auto system = prompt_after({}, 64, rng);
  const auto home = router.preferred(system);
  ASSERT_TRUE(home);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(router.preferred(prompt_after(system, 1 + i * 13, rng)), home);
  // Shorter than the routed tokens: no preference.
  EXPECT_EQ(router.preferred(std::vector<int32_t>(system.begin(), system.begin() + 63)),
            std::nullopt);
  // Different beginnings spread over every executor.
  std::map<uint64_t, int> count;
  for (int i = 0; i < 2000; ++i) ++count[*router.preferred(prompt_after({}, 64, rng))];
  ASSERT_EQ(count.size(), 4u);
  for (auto [e, n] : count) {
    EXPECT_GT(n, 2000 / 4 / 3) << "executor " << e;
    EXPECT_LT(n, 2000 / 4 * 3) << "executor " << e;
  }
}

TEST(prefix_router, an_executor_leaving_moves_only_its_own_prompts) {
  prefix_router router;
  for (uint64_t e : {1, 2, 3}) router.add(e);
  std::mt19937 rng(9);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<uint64_t> before;
  for (int i = 0; i < 500; ++i) {
    prompts.push_back(prompt_after({}, 64, rng));
    before.push_back(*router.preferred(prompts.back()));
  }
  router.remove(2);
  int moved = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto now = *router.preferred(prompts[i]);
    EXPECT_NE(now, 2u);
    if (before[i] != 2) {
      EXPECT_EQ(now, before[i]) << "prompt " << i;
    }
    moved += before[i] == 2;
  }
  EXPECT_GT(moved, 0);
  router.add(2);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(*router.preferred(prompts[i]), before[i]);
}

TEST(prefix_router, a_request_waits_for_its_executor_unless_that_one_is_much_busier) {
  const prefix_router router(64, 4);
  EXPECT_TRUE(router.takes(1, 10, std::nullopt, std::nullopt)) << "no preference";
  EXPECT_TRUE(router.takes(1, 10, 1u, 10)) << "its own";
  EXPECT_TRUE(router.takes(1, 10, 2u, std::nullopt)) << "the preferred one is gone";
  EXPECT_FALSE(router.takes(1, 2, 2u, 5));
  EXPECT_TRUE(router.takes(1, 2, 2u, 6));
}

TEST(policy, continuous_takes_in_queue_order_only_what_the_filter_lets_it) {
  batcher_options o;
  o.policy = policy_kind::continuous;
  auto policy = make_policy(o);
  waiting_queue q(100, 1 << 20);
  for (request_id id = 1; id <= 5; ++id) {
    sequence_request r;
    r.id = id;
    r.prompt = {1, 2, 3};
    ASSERT_FALSE(q.push(r));
  }
  auto odd = [](const sequence_request& r) { return r.id % 2 == 1; };
  auto picked = policy->select(q, executor_view{2, 0}, 0, odd);
  ASSERT_EQ(picked.size(), 2u);
  EXPECT_EQ(picked[0].id, 1u);
  EXPECT_EQ(picked[1].id, 3u);
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.front().id, 2u);
  picked = policy->select(q, executor_view{8, 0}, 0);
  EXPECT_EQ(picked.size(), 3u);
}
