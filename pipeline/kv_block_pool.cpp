#include "pipeline/kv_block_pool.hpp"

#include <stdexcept>
#include <string>

#include "common/hash.hpp"

namespace conveyor::pipeline {

std::size_t kv_block_pool::cache_key_hash::operator()(const cache_key& key) const {
  uint64_t h = hash_mix(key.parent_content, key.extra_key);
  for (int32_t token : key.tokens) h = hash_mix(h, static_cast<uint32_t>(token));
  return static_cast<std::size_t>(h);
}

kv_block_pool::kv_block_pool(int32_t num_blocks, int32_t block_size) : block_size_(block_size) {
  if (num_blocks < 0) throw std::invalid_argument("kv_block_pool: num_blocks must be >= 0");
  if (block_size < 1) throw std::invalid_argument("kv_block_pool: block_size must be >= 1");
  blocks_.resize(static_cast<std::size_t>(num_blocks));
  free_.reserve(blocks_.size());
  // Taken from the back: block 0 first.
  for (block_id id = num_blocks - 1; id >= 0; --id) free_.push_back(id);
  cache_.reserve(blocks_.size());
  probe_.tokens.reserve(static_cast<std::size_t>(block_size));
}

std::optional<kv_block_pool::block_id> kv_block_pool::allocate() {
  block_id id = -1;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (lru_head_ >= 0) {
    id = lru_head_;
    lru_remove(id);
    forget_cache_entry(id);
  } else {
    return std::nullopt;
  }
  auto& block = blocks_[static_cast<std::size_t>(id)];
  block.ref_count = 1;
  block.content = 0;
  ++used_;
  return id;
}

error kv_block_pool::release(block_id id) {
  if (!in_pool(id))
    return make_error(ec::internal, "kv_block_pool: release of block " + std::to_string(id) +
                                        " outside the pool");
  auto& block = blocks_[static_cast<std::size_t>(id)];
  if (block.ref_count == 0)
    return make_error(ec::internal, "kv_block_pool: release of block " + std::to_string(id) +
                                        " whose refcount is 0");
  if (--block.ref_count > 0) return {};
  --used_;
  if (block.key != nullptr) {
    lru_push_back(id);
  } else {
    block.content = 0;
    free_.push_back(id);
  }
  return {};
}

error kv_block_pool::retain(block_id id) {
  if (!in_pool(id) || blocks_[static_cast<std::size_t>(id)].ref_count == 0)
    return make_error(ec::internal, "kv_block_pool: retain of block " + std::to_string(id) +
                                        ", which no one holds");
  ++blocks_[static_cast<std::size_t>(id)].ref_count;
  return {};
}

error kv_block_pool::cache_full_block(block_id id, std::optional<block_id> parent,
                                      const std::vector<int32_t>& tokens, uint64_t extra_key) {
  auto fail = [](std::string what) { return make_error(ec::internal, "kv_block_pool: " + what); };
  if (!in_pool(id) || blocks_[static_cast<std::size_t>(id)].ref_count == 0)
    return fail("cannot cache block " + std::to_string(id) + ": not held");
  auto& block = blocks_[static_cast<std::size_t>(id)];
  if (block.content != 0)
    return fail("block " + std::to_string(id) + " already holds a cached prefix");
  if (tokens.size() != static_cast<std::size_t>(block_size_))
    return fail("a full block has " + std::to_string(block_size_) + " tokens, not " +
                std::to_string(tokens.size()));
  uint64_t parent_content = 0;
  if (parent) {
    if (!in_pool(*parent) || blocks_[static_cast<std::size_t>(*parent)].ref_count == 0)
      return fail("parent block " + std::to_string(*parent) + " is not held");
    parent_content = blocks_[static_cast<std::size_t>(*parent)].content;
    if (parent_content == 0)
      return fail("parent block " + std::to_string(*parent) + " holds no cached prefix");
  }
  auto [it, inserted] = cache_.try_emplace(cache_key{parent_content, extra_key, tokens}, id);
  if (!inserted) {
    // Keep the existing entry; this block ends the same prefix.
    block.content = blocks_[static_cast<std::size_t>(it->second)].content;
    return {};
  }
  block.content = next_content_++;
  block.key = &it->first;
  return {};
}

std::vector<kv_block_pool::block_id> kv_block_pool::match_prefix(const std::vector<int32_t>& tokens,
                                                                 uint64_t extra_key) {
  queried_tokens_ += tokens.size();
  std::vector<block_id> result;
  const std::size_t full_blocks = tokens.size() / static_cast<std::size_t>(block_size_);
  probe_.parent_content = 0;
  probe_.extra_key = extra_key;
  for (std::size_t i = 0; i < full_blocks; ++i) {
    auto first = tokens.begin() + static_cast<std::ptrdiff_t>(i * block_size_);
    probe_.tokens.assign(first, first + block_size_);
    auto it = cache_.find(probe_);
    if (it == cache_.end()) break;
    const block_id id = it->second;
    auto& block = blocks_[static_cast<std::size_t>(id)];
    if (block.ref_count++ == 0) {
      lru_remove(id);
      ++used_;
    }
    result.push_back(id);
    probe_.parent_content = block.content;
  }
  hit_tokens_ += result.size() * static_cast<uint64_t>(block_size_);
  return result;
}

int32_t kv_block_pool::ref_count(block_id id) const {
  return in_pool(id) ? blocks_[static_cast<std::size_t>(id)].ref_count : 0;
}

bool kv_block_pool::is_cached(block_id id) const {
  return in_pool(id) && blocks_[static_cast<std::size_t>(id)].key != nullptr;
}

void kv_block_pool::lru_push_back(block_id id) {
  auto& block = blocks_[static_cast<std::size_t>(id)];
  block.lru_prev = lru_tail_;
  block.lru_next = -1;
  if (lru_tail_ >= 0)
    blocks_[static_cast<std::size_t>(lru_tail_)].lru_next = id;
  else
    lru_head_ = id;
  lru_tail_ = id;
  ++evictable_;
}

void kv_block_pool::lru_remove(block_id id) {
  auto& block = blocks_[static_cast<std::size_t>(id)];
  if (block.lru_prev >= 0)
    blocks_[static_cast<std::size_t>(block.lru_prev)].lru_next = block.lru_next;
  else
    lru_head_ = block.lru_next;
  if (block.lru_next >= 0)
    blocks_[static_cast<std::size_t>(block.lru_next)].lru_prev = block.lru_prev;
  else
    lru_tail_ = block.lru_prev;
  block.lru_prev = -1;
  block.lru_next = -1;
  --evictable_;
}

void kv_block_pool::forget_cache_entry(block_id id) {
  auto& block = blocks_[static_cast<std::size_t>(id)];
  // Children keyed on this content id become unreachable: the id is never issued again.
  auto it = cache_.find(*block.key);
  cache_.erase(it);
  block.key = nullptr;
  block.content = 0;
}

}  // namespace conveyor::pipeline
