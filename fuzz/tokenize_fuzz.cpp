// Fuzz target: encoding arbitrary bytes and decoding arbitrary ids, incrementally, with the
// tokenizers Conveyor ships or tests against: llama2.c's (stories260K), and tokenizer.json's
// byte-fallback BPE (Llama 2) and byte-level BPE (Llama 3). Ids stay in the vocabulary, streamed
// text is always UTF-8, and streaming a sequence gives what decoding it whole gives.
#include <cstdlib>
#include <memory>
#include <vector>

#include "fuzz/fuzz_support.hpp"
#include "tokenizers/detokenizer.hpp"
#include "tokenizers/tokenizer.hpp"

namespace {

using conveyor::tokenizers::tokenizer;

std::vector<std::shared_ptr<const tokenizer>> load_all() {
  using namespace conveyor;
  std::vector<std::shared_ptr<const tokenizer>> all;
  for (auto load : {tokenizers::load_llama2c_tokenizer(fuzz::source_path("models/stories260K/tok512.bin")),
                    tokenizers::load_hf_tokenizer(fuzz::source_path("tests/fixtures/tokenizers/llama_spm")),
                    tokenizers::load_hf_tokenizer(fuzz::source_path("tests/fixtures/tokenizers/llama3"))}) {
    if (!load) {
      std::fprintf(stderr, "tokenize_fuzz: %s\n", message_of(load.error()).c_str());
      std::abort();
    }
    all.push_back(*load);
  }
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  static const auto tokenizers = load_all();
  if (size < 1) return 0;
  const auto& tok = *tokenizers[data[0] % tokenizers.size()];
  std::string_view bytes{reinterpret_cast<const char*>(data + 1), size - 1};
  // Encoding: any bytes (invalid UTF-8 included) give ids of the vocabulary; these tokenizers'
  // regexes finish on any input this short.
  auto encoded = tok.encode(bytes, data[0] & 0x80);
  if (!encoded) {
    std::fprintf(stderr, "tokenize_fuzz: %s\n", message_of(encoded.error()).c_str());
    std::abort();
  }
  auto& ids = *encoded;
  for (auto id : ids)
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  // Decoding: the same bytes read as ids, streamed one at a time and pushed whole.
  std::vector<int32_t> random_ids;
  for (size_t i = 0; i + 1 < bytes.size(); i += 2)
    random_ids.push_back(int32_t((uint8_t(bytes[i]) << 8 | uint8_t(bytes[i + 1])) %
                                 uint32_t(tok.vocab_size())));
  for (const auto* seq : {&ids, &random_ids}) {
    tokenizers::incremental_detokenizer one_by_one{tokenizers[data[0] % tokenizers.size()]};
    std::string streamed;
    for (auto id : *seq) {
      auto piece = one_by_one.push(id);
      fuzz::require_utf8(piece, "a streamed piece");
      streamed += piece;
    }
    streamed += one_by_one.flush();
    tokenizers::incremental_detokenizer whole{tokenizers[data[0] % tokenizers.size()]};
    std::string at_once = whole.push(*seq);
    at_once += whole.flush();
    fuzz::require_utf8(streamed, "the streamed text");
    if (streamed != at_once) std::abort();
    fuzz::require_utf8(tokenizers::decode_prompt(tok, *seq), "a decoded prompt");
  }
  return 0;
}
