// BPE encoding of one word: the lowest-ranked adjacent pair merges first, the leftmost among
// equals (the tokenizers library's heap order), in O(n log n).
#include "tokenizers/hf/bpe.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <queue>

#include <nlohmann/json.hpp>

#include "tokenizers/hf/byte_level.hpp"
#include "tokenizers/utf8.hpp"

namespace conveyor::tokenizers::hf {

namespace {

/// Words longer than this are encoded without the cache.
constexpr size_t max_cached_word = 128;
/// A thread's cache is emptied when it holds this many words.
constexpr size_t max_cached_words = 1 << 16;

std::atomic<uint64_t> next_instance{1};

struct word_cache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>> words;
};

/// A symbol of the word being merged: a doubly linked list over a vector.
struct symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

/// A candidate merge: lowest rank first, then lowest position.
struct candidate {
  int32_t rank;
  int32_t pos;
  int32_t id;
  bool operator>(const candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

std::string hex_piece(unsigned byte) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", byte);
  return buf;
}

}  // namespace

expected<bpe_model> bpe_model::parse(const nlohmann::json& value, bool byte_level,
                                     const std::string& origin) {
  if (!value.is_object() || !value.contains("type") || !value["type"].is_string())
    return make_error(ec::bad_file, origin + ": 'model' must be an object with a 'type'");
  const auto type = value["type"].get<std::string>();
  if (type != "BPE")
    return make_error(ec::bad_file,
                      origin + ": model type '" + type + "' is not supported; supported: BPE");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = value.find(key);
    if (it != value.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
      return make_error(ec::bad_file, origin + ": model BPE '" + key + "' is not supported");
  }
  if (auto it = value.find("dropout");
      it != value.end() && !it->is_null() && !(it->is_number() && it->get<double>() == 0.0))
    return make_error(ec::bad_file, origin + ": model BPE 'dropout' is not supported");
  auto vocab = value.find("vocab");
  if (vocab == value.end() || !vocab->is_object())
    return make_error(ec::bad_file, origin + ": model BPE needs a 'vocab' object");
  bpe_model m;
  m.byte_level_ = byte_level;
  m.instance_ = next_instance.fetch_add(1);
  m.vocab_.reserve(vocab->size());
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 24))
      return make_error(ec::bad_file, origin + ": model vocab id of '" + token +
                                          "' is not an integer in [0, 16777216]");
    const auto n = static_cast<int32_t>(id.get<int64_t>());
    m.vocab_.emplace(token, n);
    if (static_cast<size_t>(n) >= m.tokens_.size()) m.tokens_.resize(static_cast<size_t>(n) + 1);
    m.tokens_[static_cast<size_t>(n)] = token;
  }
  auto merges = value.find("merges");
  if (merges == value.end() || !merges->is_array())
    return make_error(ec::bad_file, origin + ": model BPE needs a 'merges' list");
  m.merges_.reserve(merges->size() * 2);
  int32_t rank = 0;
  for (const auto& item : *merges) {
    std::string left;
    std::string right;
    if (item.is_string()) {
      const auto text = item.get<std::string>();
      const auto space = text.find(' ', 1);
      if (space == std::string::npos)
        return make_error(ec::bad_file, origin + ": model merge " + std::to_string(rank) + " ('" +
                                            text + "') is not two tokens");
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (item.is_array() && item.size() == 2 && item[0].is_string() && item[1].is_string()) {
      left = item[0].get<std::string>();
      right = item[1].get<std::string>();
    } else {
      return make_error(ec::bad_file, origin + ": model merge " + std::to_string(rank) +
                                          " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    const auto l = m.vocab_.find(left);
    const auto r = m.vocab_.find(right);
    const auto merged = m.vocab_.find(left + right);
    if (l == m.vocab_.end() || r == m.vocab_.end() || merged == m.vocab_.end())
      return make_error(ec::bad_file, origin + ": model merge " + std::to_string(rank) + " ('" +
                                          left + "' '" + right +
                                          "') uses or makes a token not in the vocab");
    m.merges_.emplace(pair_key(l->second, r->second), merge{rank, merged->second});
    ++rank;
  }
  const auto flag = [&](const char* key) {
    auto it = value.find(key);
    return it != value.end() && it->is_boolean() && it->get<bool>();
  };
  m.fuse_unk_ = flag("fuse_unk");
  m.byte_fallback_ = flag("byte_fallback");
  m.ignore_merges_ = flag("ignore_merges");
  if (auto it = value.find("unk_token"); it != value.end() && it->is_string()) {
    auto id = m.vocab_.find(it->get<std::string>());
    if (id == m.vocab_.end())
      return make_error(ec::bad_file, origin + ": model unk_token '" + it->get<std::string>() +
                                          "' is not in the vocab");
    m.unk_id_ = id->second;
  }
  for (unsigned b = 0; b < 256; ++b) {
    const std::string ch = byte_level ? byte_to_char(static_cast<uint8_t>(b))
                                      : (b < 0x80 ? std::string(1, static_cast<char>(b)) : "");
    m.byte_ids_[b] = ch.empty() ? -1 : m.id_of(ch);
    m.fallback_ids_[b] = m.id_of(hex_piece(b));
  }
  if (byte_level && m.ignore_merges_) {
    std::string raw;
    for (const auto& [token, id] : m.vocab_)
      if (chars_to_bytes(token, raw)) m.raw_vocab_.emplace(raw, id);
  }
  return m;
}

int32_t bpe_model::id_of(const std::string& token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string& bpe_model::token_of(int32_t id) const {
  static const std::string none;
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) return none;
  return tokens_[static_cast<size_t>(id)];
}

void bpe_model::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() > max_cached_word) {
    merge_word(word, out);
    return;
  }
  thread_local word_cache cache;
  if (cache.owner != instance_ || cache.words.size() >= max_cached_words) {
    cache.words.clear();
    cache.owner = instance_;
  }
  std::string key{word};
  auto it = cache.words.find(key);
  if (it != cache.words.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  const size_t first = out.size();
  merge_word(word, out);
  cache.words.emplace(std::move(key), std::vector<int32_t>(out.begin() + first, out.end()));
}

void bpe_model::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (byte_level_) {
      if (auto it = raw_vocab_.find(std::string{word}); it != raw_vocab_.end()) {
        out.push_back(it->second);
        return;
      }
    } else if (auto it = vocab_.find(std::string{word}); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  thread_local std::vector<symbol> symbols;
  symbols.clear();
  const auto add = [&](int32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, true});
  };
  // The unknown characters waiting to be added (fuse_unk joins a run into one).
  bool unk_pending = false;
  const auto flush_unk = [&] {
    if (unk_pending) add(unk_id_);
    unk_pending = false;
  };
  const auto unknown = [&] {
    if (unk_id_ < 0) return;  // no unknown token: the character is dropped, as tokenizers does
    if (unk_pending && !fuse_unk_) add(unk_id_);
    unk_pending = true;
  };
  if (byte_level_) {
    for (unsigned char b : word) {
      const int32_t id = byte_ids_[b];
      if (id >= 0) {
        flush_unk();
        add(id);
      } else {
        unknown();
      }
    }
  } else {
    thread_local std::string character;
    for (size_t pos = 0; pos < word.size();) {
      const auto c = static_cast<unsigned char>(word[pos]);
      size_t length = 1;
      int32_t id = -1;
      if (c < 0x80) {
        id = byte_ids_[c];
      } else {
        const auto scan = scan_utf8(word.substr(pos));
        length = scan.length;
        character.assign(word.data() + pos, length);
        id = id_of(character);
      }
      if (id >= 0) {
        flush_unk();
        add(id);
      } else {
        bool covered = byte_fallback_;
        for (size_t i = 0; covered && i < length; ++i)
          covered = fallback_ids_[static_cast<unsigned char>(word[pos + i])] >= 0;
        if (covered) {
          // As tokenizers: a pending unknown token is not flushed before byte pieces.
          for (size_t i = 0; i < length; ++i)
            add(fallback_ids_[static_cast<unsigned char>(word[pos + i])]);
        } else {
          unknown();
        }
      }
      pos += length;
    }
  }
  flush_unk();
  if (symbols.empty()) return;
  symbols.back().next = -1;

  thread_local std::vector<candidate> heap_storage;
  heap_storage.clear();
  std::priority_queue<candidate, std::vector<candidate>, std::greater<candidate>> heap{
      std::greater<candidate>{}, std::move(heap_storage)};
  const auto consider = [&](int32_t pos) {
    const int32_t next = symbols[static_cast<size_t>(pos)].next;
    if (next < 0) return;
    auto it = merges_.find(
        pair_key(symbols[static_cast<size_t>(pos)].id, symbols[static_cast<size_t>(next)].id));
    if (it != merges_.end()) heap.push({it->second.rank, pos, it->second.id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);
  while (!heap.empty()) {
    const candidate top = heap.top();
    heap.pop();
    auto& sym = symbols[static_cast<size_t>(top.pos)];
    if (!sym.alive || sym.next < 0) continue;
    auto& right = symbols[static_cast<size_t>(sym.next)];
    auto it = merges_.find(pair_key(sym.id, right.id));
    if (it == merges_.end() || it->second.id != top.id) continue;  // stale
    sym.id = top.id;
    right.alive = false;
    sym.next = right.next;
    if (sym.next >= 0) symbols[static_cast<size_t>(sym.next)].prev = top.pos;
    if (sym.prev >= 0) consider(sym.prev);
    consider(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next)
    out.push_back(symbols[static_cast<size_t>(i)].id);
}

}  // namespace conveyor::tokenizers::hf
