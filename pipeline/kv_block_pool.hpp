// The block bookkeeping of a paged KV cache with exact automatic prefix caching: which blocks
// are free, which are referenced by running sequences, and which hold the KV of a known token
// prefix and may be shared or evicted in least-recently-released order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/error.hpp"

namespace conveyor::pipeline {

/// The pool of `num_blocks` KV-cache blocks of `block_size` tokens each, ids 0..num_blocks-1.
///
/// Every block is in exactly one of three states: free (no cache entry, refcount 0), evictable
/// (a cache entry, refcount 0, on an LRU list) or used (refcount > 0, cached or not).
///
/// Prefix caching is exact: a cached block is keyed on (its parent's content id, an extra key,
/// its `block_size` exact tokens) in a hash map whose equality compares the tokens, and every
/// cached prefix gets a content id from a counter that never repeats. A block id reused after
/// eviction therefore never reaches the children of its earlier content: those become
/// unreachable and are evicted in their turn.
///
/// Every call is O(1) or O(block_size); nothing scans the pool. Not thread-safe: one instance
/// per executor, touched only by its thread.
class kv_block_pool {
 public:
  // -- member types -----------------------------------------------------------------------------

  /// A block's index in the pool.
  using block_id = int32_t;

  // -- constructors -----------------------------------------------------------------------------

  /// A pool of `num_blocks` free blocks of `block_size` tokens. Throws std::invalid_argument when
  /// `num_blocks` < 0 or `block_size` < 1 (the configuration's checks keep that from happening).
  kv_block_pool(int32_t num_blocks, int32_t block_size);

  // -- blocks -----------------------------------------------------------------------------------

  /// A block for the caller, its refcount 1: a free block if there is one, else the evictable
  /// block released longest ago (its cache entry is forgotten), else std::nullopt. Never a block
  /// with a refcount above 0.
  std::optional<block_id> allocate();

  /// Drops one reference of `id`. At refcount 0 a block with a cache entry becomes evictable (the
  /// most recently used end of the LRU list); any other block becomes free. Releasing a block
  /// whose refcount is 0, or an id outside the pool, is a programming error: it returns an
  /// `ec::internal` error and changes nothing.
  error release(block_id id);

  /// Takes one more reference on `id`, which the caller holds: a sequence that shares another's
  /// block (the prompt of a request with n > 1). Returns an `ec::internal` error, changing
  /// nothing, for an id outside the pool or one whose refcount is 0.
  error retain(block_id id);

  // -- prefix caching ---------------------------------------------------------------------------

  /// Records that block `id` holds the KV of the `block_size` tokens `tokens` that follow the
  /// prefix ending with the cached block `parent` (std::nullopt for a sequence's first block);
  /// `extra_key` (e.g. the model or an adapter) is part of the key of every block. The caller
  /// must hold references on `id` and `parent`. When the same (parent, tokens, extra_key) is
  /// already cached by another block, the existing entry is kept: `id` gets no cache entry (it
  /// becomes free on its last release) but takes the prefix's content id, so it can still be the
  /// parent of the next block. Returns an `ec::internal` error, changing nothing, when `id` or
  /// `parent` is outside the pool or unreferenced, `id` already holds a cached prefix, `parent`
  /// holds none, or `tokens` is not `block_size` long.
  error cache_full_block(block_id id, std::optional<block_id> parent,
                         const std::vector<int32_t>& tokens, uint64_t extra_key = 0);

  /// The blocks of the longest run of full leading blocks of `tokens` that are cached (under
  /// `extra_key`), in order; a partial last block never matches. Takes a reference on each
  /// (an evictable one leaves the LRU list): the caller releases them like allocated blocks.
  /// Adds `tokens.size()` to `queried_tokens()` and the matched tokens to `hit_tokens()`.
  std::vector<block_id> match_prefix(const std::vector<int32_t>& tokens, uint64_t extra_key = 0);

  // -- gauges and counters ----------------------------------------------------------------------

  /// How many tokens a block holds.
  int32_t block_size() const { return block_size_; }

  /// How many blocks the pool has.
  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }

  /// What `allocate` could still hand out: free plus evictable blocks.
  int32_t free_blocks() const { return static_cast<int32_t>(free_.size()) + evictable_; }

  /// Blocks with a cache entry, referenced or evictable.
  int32_t cached_blocks() const { return static_cast<int32_t>(cache_.size()); }

  /// Blocks with a refcount above 0.
  int32_t used_blocks() const { return used_; }

  /// The refcount of `id` (0 for an id outside the pool).
  int32_t ref_count(block_id id) const;

  /// True when `id` has a cache entry (a lookup can reach it while its parent is cached).
  bool is_cached(block_id id) const;

  /// Tokens passed to `match_prefix` so far.
  uint64_t queried_tokens() const { return queried_tokens_; }

  /// Tokens `match_prefix` found cached so far.
  uint64_t hit_tokens() const { return hit_tokens_; }

 private:
  // -- member types -----------------------------------------------------------------------------

  /// What a cached block is keyed on; equality compares the tokens, never only a hash.
  struct cache_key {
    uint64_t parent_content = 0;  // 0: the first block of a sequence
    uint64_t extra_key = 0;
    std::vector<int32_t> tokens;

    bool operator==(const cache_key& other) const {
      return parent_content == other.parent_content && extra_key == other.extra_key &&
             tokens == other.tokens;
    }
  };

  struct cache_key_hash {
    std::size_t operator()(const cache_key& key) const;
  };

  struct block_state {
    int32_t ref_count = 0;
    /// The content id of the prefix this block ends; 0 for none.
    uint64_t content = 0;
    /// The block's entry in `cache_`, or null (a free block, or one that duplicated an entry).
    const cache_key* key = nullptr;
    /// Neighbours on the LRU list of evictable blocks (-1 for none).
    block_id lru_prev = -1;
    block_id lru_next = -1;
  };

  // -- helpers ----------------------------------------------------------------------------------

  bool in_pool(block_id id) const { return id >= 0 && id < num_blocks(); }
  void lru_push_back(block_id id);
  void lru_remove(block_id id);
  void forget_cache_entry(block_id id);

  // -- member variables -------------------------------------------------------------------------

  int32_t block_size_;
  std::vector<block_state> blocks_;
  /// Free blocks without a cache entry, taken from the back.
  std::vector<block_id> free_;
  /// The LRU list of evictable blocks: head released longest ago, tail most recently.
  block_id lru_head_ = -1;
  block_id lru_tail_ = -1;
  int32_t evictable_ = 0;
  int32_t used_ = 0;
  std::unordered_map<cache_key, block_id, cache_key_hash> cache_;
  /// The next content id; never repeats, 0 is "none".
  uint64_t next_content_ = 1;
  /// A lookup key reused by `match_prefix` to spare an allocation per block.
  cache_key probe_;
  uint64_t queried_tokens_ = 0;
  uint64_t hit_tokens_ = 0;
};

}  // namespace conveyor::pipeline
