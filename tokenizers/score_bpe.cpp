// SentencePiece's BPE merge loop over a scored vocabulary.
#include "tokenizers/score_bpe.hpp"

#include <queue>
#include <utility>

#include "tokenizers/utf8.hpp"

namespace conveyor::tokenizers {

score_bpe::score_bpe(std::vector<std::string> pieces, const std::vector<float>& scores,
                     const std::vector<bool>& mergeable, const std::array<int32_t, 256>& byte_ids,
                     int32_t unk_id)
    : pieces_(std::move(pieces)), scores_(scores), byte_ids_(byte_ids), unk_id_(unk_id) {
  ids_.reserve(pieces_.size());
  for (size_t id = 0; id < pieces_.size(); ++id)
    if (id < mergeable.size() && mergeable[id]) ids_.emplace(pieces_[id], static_cast<int32_t>(id));
}

int32_t score_bpe::id_of(std::string_view piece) const {
  auto found = ids_.find(piece);
  return found == ids_.end() ? -1 : found->second;
}

void score_bpe::encode(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  // The symbols form a linked list over `text`; a merge grows the left symbol and empties the
  // right one.
  struct symbol {
    size_t begin;
    size_t size;
    int prev;
    int next;
  };
  std::vector<symbol> symbols;
  symbols.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t size = scan_utf8(text.substr(pos)).length;
    if (size == 0) size = 1;  // not UTF-8: a byte on its own, spelled by byte fallback
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({pos, size, index - 1, -1});
    if (index > 0) symbols[index - 1].next = index;
    pos += size;
  }
  // Candidate merges, best first: highest score, then leftmost. Entries go stale when one of
  // their symbols changes; they are recognized and skipped when popped.
  struct candidate {
    float score;
    int left;
    int right;
    size_t size;
  };
  const auto worse = [](const candidate& a, const candidate& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<candidate, std::vector<candidate>, decltype(worse)> agenda{worse};
  const auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const auto merged = text.substr(symbols[left].begin, symbols[left].size + symbols[right].size);
    if (auto i = ids_.find(merged); i != ids_.end())
      agenda.push({scores_[i->second], left, right, merged.size()});
  };
  for (size_t i = 1; i < symbols.size(); ++i)
    consider(static_cast<int>(i - 1), static_cast<int>(i));
  while (!agenda.empty()) {
    const candidate top = agenda.top();
    agenda.pop();
    symbol& left = symbols[top.left];
    symbol& right = symbols[top.right];
    if (left.size == 0 || right.size == 0 || left.next != top.right ||
        left.size + right.size != top.size)
      continue;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.left;
    consider(left.prev, top.left);
    consider(top.left, left.next);
  }
  for (int i = 0; i >= 0; i = symbols[i].next) {
    const auto piece = text.substr(symbols[i].begin, symbols[i].size);
    if (auto found = ids_.find(piece); found != ids_.end()) {
      out.push_back(found->second);
      continue;
    }
    for (char c : piece) {
      const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
      if (id >= 0)
        out.push_back(id);
      else if (unk_id_ >= 0)
        out.push_back(unk_id_);
    }
  }
}

}  // namespace conveyor::tokenizers
