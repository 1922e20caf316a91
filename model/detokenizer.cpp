// Incremental detokenization that never splits a UTF-8 character.
#include "model/detokenizer.hpp"

#include <utility>

#include "model/utf8.hpp"

namespace conveyor::model {

incremental_detokenizer::incremental_detokenizer(std::shared_ptr<const tokenizer> tok,
                                                 int32_t preceding)
    : tokenizer_(std::move(tok)), previous_(preceding) {}

std::string incremental_detokenizer::bytes_of(int32_t id) const {
  auto bytes = tokenizer_->token_bytes(id);
  // Only at the start of the text, as SentencePiece decodes: a BOS inside a stream that has
  // already printed something (an added token of a tokenizer.json) leaves the next space alone.
  if (at_start_ && previous_ == tokenizer_->bos_id() &&
      tokenizer_->decode_strips_leading_space() && !bytes.empty() && bytes.front() == ' ')
    bytes.erase(0, 1);
  return bytes;
}

void incremental_detokenizer::take(int32_t id) {
  auto bytes = bytes_of(id);
  if (!bytes.empty()) at_start_ = false;
  held_ += bytes;
  previous_ = id;
}

std::string incremental_detokenizer::push(int32_t id) {
  take(id);
  return drain_utf8(held_, false);
}

std::string incremental_detokenizer::push(const std::vector<int32_t>& ids) {
  for (auto id : ids) take(id);
  return drain_utf8(held_, false);
}

std::string incremental_detokenizer::peek(int32_t id) const {
  std::string held = held_ + bytes_of(id);
  return drain_utf8(held, false);
}

std::string incremental_detokenizer::flush() {
  return drain_utf8(held_, true);
}

std::string decode_prompt(const tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string bytes;
  for (auto id : ids) bytes += tok.token_bytes(id);
  auto text = drain_utf8(bytes, true);
  if (tok.decode_strips_leading_space() && !text.empty() && text.front() == ' ') text.erase(0, 1);
  return text;
}

}  // namespace conveyor::model
