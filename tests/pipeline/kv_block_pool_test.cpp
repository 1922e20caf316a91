// The KV block pool's bookkeeping: allocation until exhaustion, refcounts, eviction of cached
// blocks in least-recently-released order, exact prefix matches that survive block-id reuse, and
// a randomized run against a test-side record of what every cached block holds.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "pipeline/kv_block_pool.hpp"

using namespace conveyor;
using namespace conveyor::pipeline;

namespace {

using ids = std::vector<kv_block_pool::block_id>;
using tokens = std::vector<int32_t>;

}  // namespace

TEST(kv_block_pool, allocates_every_block_once_then_nothing) {
  kv_block_pool pool(3, 4);
  EXPECT_EQ(pool.free_blocks(), 3);
  std::set<kv_block_pool::block_id> seen;
  for (int i = 0; i < 3; ++i) {
    auto id = pool.allocate();
    ASSERT_TRUE(id);
    EXPECT_EQ(pool.ref_count(*id), 1);
    seen.insert(*id);
  }
  EXPECT_EQ(seen, (std::set<kv_block_pool::block_id>{0, 1, 2}));
  EXPECT_EQ(pool.allocate(), std::nullopt);
  EXPECT_EQ(pool.free_blocks(), 0);
  EXPECT_EQ(pool.used_blocks(), 3);
}

TEST(kv_block_pool, released_uncached_block_is_allocatable_again) {
  kv_block_pool pool(2, 4);
  auto a = pool.allocate();
  auto b = pool.allocate();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(pool.allocate(), std::nullopt);
  EXPECT_FALSE(pool.release(*b));
  EXPECT_EQ(pool.ref_count(*b), 0);
  EXPECT_EQ(pool.free_blocks(), 1);
  EXPECT_EQ(pool.used_blocks(), 1);
  EXPECT_EQ(pool.cached_blocks(), 0);
  EXPECT_EQ(pool.allocate(), b);
}

// A shared block (n > 1) stays used until its last holder releases it; retaining a block no one
// holds is an error that changes nothing.
TEST(kv_block_pool, a_retained_block_lives_until_its_last_release) {
  kv_block_pool pool(2, 4);
  auto a = pool.allocate();
  ASSERT_TRUE(a);
  EXPECT_FALSE(pool.retain(*a));
  EXPECT_EQ(pool.ref_count(*a), 2);
  EXPECT_FALSE(pool.release(*a));
  EXPECT_EQ(pool.used_blocks(), 1);
  EXPECT_EQ(pool.free_blocks(), 1);
  EXPECT_FALSE(pool.release(*a));
  EXPECT_EQ(pool.used_blocks(), 0);
  EXPECT_EQ(pool.free_blocks(), 2);
  const auto refused = pool.retain(*a);
  ASSERT_TRUE(refused);
  EXPECT_EQ(message_of(refused),
            "kv_block_pool: retain of block " + std::to_string(*a) + ", which no one holds");
  EXPECT_EQ(pool.ref_count(*a), 0);
  EXPECT_TRUE(pool.retain(7));
}

TEST(kv_block_pool, releasing_an_unreferenced_block_is_an_error_that_changes_nothing) {
  kv_block_pool pool(2, 4);
  auto a = pool.allocate();
  ASSERT_TRUE(a);
  EXPECT_FALSE(pool.release(*a));
  auto err = pool.release(*a);
  EXPECT_EQ(err.code, ec::internal);
  EXPECT_EQ(pool.ref_count(*a), 0);
  EXPECT_EQ(pool.free_blocks(), 2);
  EXPECT_EQ(pool.release(7).code, ec::internal);
  EXPECT_EQ(pool.release(-1).code, ec::internal);
  EXPECT_EQ(pool.free_blocks(), 2);
  EXPECT_EQ(pool.used_blocks(), 0);
}

TEST(kv_block_pool, rejects_bad_cache_calls) {
  kv_block_pool pool(3, 2);
  auto a = pool.allocate();
  auto b = pool.allocate();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(pool.cache_full_block(*a, std::nullopt, {1}).code, ec::internal);    // not full
  EXPECT_EQ(pool.cache_full_block(2, std::nullopt, {1, 2}).code, ec::internal);  // not held
  EXPECT_EQ(pool.cache_full_block(*a, *b, {1, 2}).code, ec::internal);           // parent uncached
  EXPECT_EQ(pool.cached_blocks(), 0);
  EXPECT_FALSE(pool.cache_full_block(*a, std::nullopt, {1, 2}));
  EXPECT_EQ(pool.cache_full_block(*a, std::nullopt, {3, 4}).code, ec::internal);  // twice
  EXPECT_EQ(pool.cached_blocks(), 1);
  EXPECT_THROW(kv_block_pool(1, 0), std::invalid_argument);
  EXPECT_THROW(kv_block_pool(-1, 4), std::invalid_argument);
}

TEST(kv_block_pool, evicts_cached_blocks_oldest_released_first_and_forgets_them) {
  kv_block_pool pool(3, 2);
  // Three one-block sequences, cached, released in the order 1, 0, 2.
  ids blocks;
  for (int32_t i = 0; i < 3; ++i) {
    auto id = pool.allocate();
    ASSERT_TRUE(id);
    ASSERT_FALSE(pool.cache_full_block(*id, std::nullopt, {i, i}));
    blocks.push_back(*id);
  }
  ASSERT_FALSE(pool.release(blocks[1]));
  ASSERT_FALSE(pool.release(blocks[0]));
  ASSERT_FALSE(pool.release(blocks[2]));
  EXPECT_EQ(pool.free_blocks(), 3);
  EXPECT_EQ(pool.cached_blocks(), 3);
  EXPECT_EQ(pool.used_blocks(), 0);

  EXPECT_EQ(pool.allocate(), blocks[1]);
  EXPECT_EQ(pool.cached_blocks(), 2);
  EXPECT_FALSE(pool.is_cached(blocks[1]));
  EXPECT_TRUE(pool.match_prefix({1, 1}).empty());
  EXPECT_EQ(pool.allocate(), blocks[0]);
  EXPECT_TRUE(pool.match_prefix({0, 0}).empty());
  // The last one is still cached and matches.
  EXPECT_EQ(pool.match_prefix({2, 2}), ids{blocks[2]});
  EXPECT_EQ(pool.allocate(), std::nullopt);  // it is referenced now, so not evictable
}

TEST(kv_block_pool, matched_block_leaves_the_lru_and_returns_at_its_newest_end) {
  kv_block_pool pool(2, 1);
  auto a = pool.allocate();
  auto b = pool.allocate();
  ASSERT_TRUE(a && b);
  ASSERT_FALSE(pool.cache_full_block(*a, std::nullopt, {10}));
  ASSERT_FALSE(pool.cache_full_block(*b, std::nullopt, {20}));
  ASSERT_FALSE(pool.release(*a));  // a is older
  ASSERT_FALSE(pool.release(*b));
  EXPECT_EQ(pool.match_prefix({10}), ids{*a});  // a used again
  ASSERT_FALSE(pool.release(*a));               // now a is the newest
  EXPECT_EQ(pool.allocate(), b);
  EXPECT_EQ(pool.match_prefix({10}), ids{*a});
}

TEST(kv_block_pool, a_shared_prefix_stays_until_every_sequence_releases_it) {
  kv_block_pool pool(3, 2);
  auto a = pool.allocate();
  auto b = pool.allocate();
  ASSERT_TRUE(a && b);
  ASSERT_FALSE(pool.cache_full_block(*a, std::nullopt, {1, 2}));
  ASSERT_FALSE(pool.cache_full_block(*b, *a, {3, 4}));

  auto first = pool.match_prefix({1, 2, 3, 4, 5});
  auto second = pool.match_prefix({1, 2, 3, 4});
  EXPECT_EQ(first, (ids{*a, *b}));
  EXPECT_EQ(second, (ids{*a, *b}));
  ASSERT_FALSE(pool.release(*a));  // the writer lets go
  ASSERT_FALSE(pool.release(*b));
  EXPECT_EQ(pool.ref_count(*a), 2);
  EXPECT_EQ(pool.ref_count(*b), 2);
  EXPECT_EQ(pool.free_blocks(), 1);

  for (auto id : first) ASSERT_FALSE(pool.release(id));
  EXPECT_EQ(pool.ref_count(*a), 1);
  auto c = pool.allocate();
  ASSERT_TRUE(c);
  EXPECT_EQ(pool.allocate(), std::nullopt);  // a and b are still held by the second sequence
  for (auto id : second) ASSERT_FALSE(pool.release(id));
  EXPECT_EQ(pool.free_blocks(), 2);
  EXPECT_EQ(pool.cached_blocks(), 2);
  EXPECT_EQ(pool.allocate(), a);  // released first (the loop released a, then b)
}

TEST(kv_block_pool, never_a_false_hit_when_a_parent_id_is_reused) {
  kv_block_pool pool(3, 2);
  auto a = pool.allocate();
  auto b = pool.allocate();
  ASSERT_TRUE(a && b);
  ASSERT_FALSE(pool.cache_full_block(*a, std::nullopt, {1, 2}));
  ASSERT_FALSE(pool.cache_full_block(*b, *a, {3, 4}));
  // The sequence ends; another holds both blocks, then lets go of a only: a alone is evictable.
  ASSERT_FALSE(pool.release(*a));
  ASSERT_FALSE(pool.release(*b));
  ASSERT_EQ(pool.match_prefix({1, 2, 3, 4}), (ids{*a, *b}));
  ASSERT_FALSE(pool.release(*a));

  // The free block goes first, then a is evicted and its id reused for another prefix.
  auto c = pool.allocate();
  auto reused = pool.allocate();
  ASSERT_TRUE(c);
  ASSERT_EQ(reused, a);
  ASSERT_FALSE(pool.cache_full_block(*reused, std::nullopt, {7, 8}));
  // b's entry still exists, keyed on a's old content: the old tokens reach neither block.
  EXPECT_TRUE(pool.is_cached(*b));
  EXPECT_EQ(pool.match_prefix({1, 2, 3, 4}), ids{});
  // The new prefix followed by b's tokens reaches only the new block.
  auto hit = pool.match_prefix({7, 8, 3, 4});
  EXPECT_EQ(hit, ids{*reused});
}

TEST(kv_block_pool, a_partial_last_block_never_matches) {
  kv_block_pool pool(2, 4);
  auto a = pool.allocate();
  ASSERT_TRUE(a);
  ASSERT_FALSE(pool.cache_full_block(*a, std::nullopt, {1, 2, 3, 4}));
  EXPECT_EQ(pool.match_prefix({1, 2, 3}), ids{});
  EXPECT_EQ(pool.match_prefix({}), ids{});
  EXPECT_EQ(pool.match_prefix({1, 2, 3, 4, 5, 6, 7}), ids{*a});
  EXPECT_EQ(pool.match_prefix({1, 2, 3, 5}), ids{});
  EXPECT_EQ(pool.ref_count(*a), 2);
}

TEST(kv_block_pool, the_extra_key_separates_caches) {
  kv_block_pool pool(2, 2);
  auto a = pool.allocate();
  ASSERT_TRUE(a);
  ASSERT_FALSE(pool.cache_full_block(*a, std::nullopt, {1, 2}, 42));
  EXPECT_EQ(pool.match_prefix({1, 2}), ids{});
  EXPECT_EQ(pool.match_prefix({1, 2}, 43), ids{});
  EXPECT_EQ(pool.match_prefix({1, 2}, 42), ids{*a});
}

TEST(kv_block_pool, counts_queried_and_hit_tokens) {
  kv_block_pool pool(4, 2);
  auto a = pool.allocate();
  ASSERT_TRUE(a);
  ASSERT_FALSE(pool.cache_full_block(*a, std::nullopt, {1, 2}));
  EXPECT_EQ(pool.queried_tokens(), 0u);
  EXPECT_EQ(pool.hit_tokens(), 0u);
  pool.match_prefix({1, 2, 3, 4, 5});  // 5 queried, 2 hit
  pool.match_prefix({5, 6});           // 2 queried, 0 hit
  pool.match_prefix({1, 2, 9});        // 3 queried, 2 hit
  EXPECT_EQ(pool.queried_tokens(), 10u);
  EXPECT_EQ(pool.hit_tokens(), 4u);
}

TEST(kv_block_pool, the_same_prefix_cached_twice_keeps_the_first_entry) {
  kv_block_pool pool(4, 2);
  auto a = pool.allocate();
  auto b = pool.allocate();
  ASSERT_TRUE(a && b);
  ASSERT_FALSE(pool.cache_full_block(*a, std::nullopt, {1, 2}));
  ASSERT_FALSE(pool.cache_full_block(*b, std::nullopt, {1, 2}));  // a duplicate: kept out
  EXPECT_EQ(pool.cached_blocks(), 1);
  EXPECT_TRUE(pool.is_cached(*a));
  EXPECT_FALSE(pool.is_cached(*b));
  // The duplicate can still parent the next block, and that chain matches through a.
  auto c = pool.allocate();
  ASSERT_TRUE(c);
  ASSERT_FALSE(pool.cache_full_block(*c, *b, {3, 4}));
  EXPECT_EQ(pool.match_prefix({1, 2, 3, 4}), (ids{*a, *c}));
  // The duplicate becomes free on release (no entry to keep); a stays cached.
  ASSERT_FALSE(pool.release(*b));
  EXPECT_EQ(pool.allocate(), b);
  EXPECT_EQ(pool.cached_blocks(), 2);
}

// 2,000 random operations on a small pool: sequences start (matching their prefix, then
// allocating and caching the rest), end, or release a block twice. After each, the pool's gauges
// agree with the test's own refcounts, and every matched block holds exactly the tokens the test
// recorded when it cached it.
TEST(kv_block_pool, random_operations_keep_the_books_exact) {
  constexpr int32_t num_blocks = 12;
  constexpr int32_t block_size = 2;
  kv_block_pool pool(num_blocks, block_size);
  std::mt19937 rng(1234);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  std::vector<int32_t> refs(num_blocks, 0);           // the test's refcounts
  std::map<kv_block_pool::block_id, tokens> content;  // the whole prefix a block ends
  std::vector<ids> sequences;                         // blocks each live sequence holds
  // A few stems so that prompts share prefixes; a small alphabet so that ids collide.
  const std::vector<tokens> stems = {{1, 2, 3, 4}, {1, 2, 5, 6}, {2, 1}, {}};
  int hits = 0, evictions_seen = 0;

  for (int op = 0; op < 2000; ++op) {
    const int kind = uniform(0, 9);
    if (kind < 5) {
      tokens prompt = stems[static_cast<std::size_t>(uniform(0, 3))];
      const int extra = uniform(0, 6);
      for (int i = 0; i < extra; ++i) prompt.push_back(uniform(1, 3));

      ids held = pool.match_prefix(prompt);
      for (std::size_t i = 0; i < held.size(); ++i) {
        const auto id = held[i];
        ASSERT_TRUE(content.count(id)) << "matched block " << id << " was never cached";
        const tokens expected(prompt.begin(),
                              prompt.begin() + static_cast<std::ptrdiff_t>((i + 1) * block_size));
        ASSERT_EQ(content[id], expected) << "block " << id << " matched other tokens";
        ++refs[static_cast<std::size_t>(id)];
        ++hits;
      }
      // Allocate and cache the remaining full blocks while blocks last.
      const std::size_t full = prompt.size() / block_size;
      for (std::size_t i = held.size(); i < full; ++i) {
        const int cached_before = pool.cached_blocks();
        auto id = pool.allocate();
        if (!id) break;
        ASSERT_EQ(refs[static_cast<std::size_t>(*id)], 0) << "handed out a referenced block";
        if (pool.cached_blocks() < cached_before) ++evictions_seen;
        content.erase(*id);
        refs[static_cast<std::size_t>(*id)] = 1;
        const tokens block(prompt.begin() + static_cast<std::ptrdiff_t>(i * block_size),
                           prompt.begin() + static_cast<std::ptrdiff_t>((i + 1) * block_size));
        std::optional<kv_block_pool::block_id> parent;
        if (i > 0) parent = held.back();
        ASSERT_FALSE(pool.cache_full_block(*id, parent, block));
        content[*id] = tokens(prompt.begin(),
                              prompt.begin() + static_cast<std::ptrdiff_t>((i + 1) * block_size));
        held.push_back(*id);
      }
      // A partial tail block, never cached.
      if (prompt.size() % block_size != 0) {
        if (auto id = pool.allocate()) {
          ASSERT_EQ(refs[static_cast<std::size_t>(*id)], 0);
          content.erase(*id);
          refs[static_cast<std::size_t>(*id)] = 1;
          held.push_back(*id);
        }
      }
      sequences.push_back(held);
    } else if (kind < 9 && !sequences.empty()) {
      const auto at = static_cast<std::size_t>(uniform(0, static_cast<int>(sequences.size()) - 1));
      for (auto id : sequences[at]) {
        ASSERT_FALSE(pool.release(id));
        --refs[static_cast<std::size_t>(id)];
      }
      sequences.erase(sequences.begin() + static_cast<std::ptrdiff_t>(at));
    } else {
      // Releasing an unreferenced block fails and changes nothing.
      const auto id = uniform(0, num_blocks - 1);
      if (refs[static_cast<std::size_t>(id)] == 0) {
        const int free_before = pool.free_blocks();
        EXPECT_EQ(pool.release(id).code, ec::internal);
        EXPECT_EQ(pool.free_blocks(), free_before);
      }
    }

    int used = 0;
    for (int32_t id = 0; id < num_blocks; ++id) {
      ASSERT_EQ(pool.ref_count(id), refs[static_cast<std::size_t>(id)]) << "block " << id;
      if (refs[static_cast<std::size_t>(id)] > 0) ++used;
      // A cached block is one the test recorded (its tokens are known).
      if (pool.is_cached(id)) {
        ASSERT_TRUE(content.count(id));
      }
    }
    ASSERT_EQ(pool.used_blocks(), used);
    ASSERT_EQ(pool.free_blocks() + pool.used_blocks(), num_blocks);
    ASSERT_LE(pool.cached_blocks(), num_blocks);
  }
  // The run exercised hits and evictions, not just allocation.
  EXPECT_GT(hits, 50);
  EXPECT_GT(evictions_seen, 20);
  EXPECT_EQ(pool.hit_tokens(), static_cast<uint64_t>(hits) * block_size);
}
