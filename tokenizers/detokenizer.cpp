// Token bytes to text as transformers decodes them; incremental detokenization that never splits
// a UTF-8 character.
#include "tokenizers/detokenizer.hpp"

#include <utility>

#include "tokenizers/utf8.hpp"

namespace conveyor::tokenizers {

std::string text_assembler::push(std::string_view bytes, bool byte_fallback) {
  std::string out;
  if (!byte_fallback) {
    if (bytes.empty()) return out;  // a control token: a run goes on across it
    out = close_run();
    held_.append(bytes.data(), bytes.size());
    out += drain_utf8(held_, false);
    return out;
  }
  // A run starts: ordinary bytes before it are decoded on their own.
  if (!in_run_) out = drain_utf8(held_, true);
  in_run_ = true;
  if (run_failed_) {
    out += replacement_character;
    return out;
  }
  run_.append(bytes.data(), bytes.size());
  ++run_tokens_;
  // run_ held the start of a character; with this byte it is one, still a start, or neither.
  const auto scan = scan_utf8(run_);
  if (scan.kind == utf8_kind::incomplete) return out;
  if (scan.kind == utf8_kind::valid && scan.length == run_.size()) {
    out += run_;
  } else {
    run_failed_ = true;
    for (size_t i = 0; i < run_tokens_; ++i) out += replacement_character;
  }
  run_.clear();
  run_tokens_ = 0;
  return out;
}

std::string text_assembler::close_run() {
  std::string out;
  // What is held is an incomplete character: the run is not UTF-8.
  for (size_t i = 0; i < run_tokens_; ++i) out += replacement_character;
  run_.clear();
  run_tokens_ = 0;
  in_run_ = false;
  run_failed_ = false;
  return out;
}

std::string text_assembler::finish() {
  std::string out = close_run();
  out += drain_utf8(held_, true);
  return out;
}

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

std::string incremental_detokenizer::push(int32_t id) {
  const auto bytes = bytes_of(id);
  if (!bytes.empty()) at_start_ = false;
  previous_ = id;
  return text_.push(bytes, tokenizer_->is_byte_fallback(id));
}

std::string incremental_detokenizer::push(const std::vector<int32_t>& ids) {
  std::string out;
  for (auto id : ids) out += push(id);
  return out;
}

std::string incremental_detokenizer::peek(int32_t id) const {
  text_assembler text = text_;
  return text.push(bytes_of(id), tokenizer_->is_byte_fallback(id));
}

std::string incremental_detokenizer::flush() {
  return text_.finish();
}

std::string decode_prompt(const tokenizer& tok, const std::vector<int32_t>& ids) {
  text_assembler assembler;
  std::string text;
  for (auto id : ids) text += assembler.push(tok.token_bytes(id), tok.is_byte_fallback(id));
  text += assembler.finish();
  if (tok.decode_strips_leading_space() && !text.empty() && text.front() == ' ') text.erase(0, 1);
  return text;
}

}  // namespace conveyor::tokenizers
