// Fuzz target: loading tokenizer.json. Arbitrary bytes either give an error, or a tokenizer
// that encodes a fixed text into ids within its vocabulary whose decoding is UTF-8, or says why
// it cannot (a regex that backtracks beyond its budget), naming the file.
#include <cstdlib>

#include "fuzz/fuzz_support.hpp"
#include "tokenizers/detokenizer.hpp"
#include "tokenizers/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  const auto path = fuzz::write_scratch(data, size, "-tokenizer.json");
  auto tok = tokenizers::load_hf_tokenizer(path);
  if (!tok) {
    if (message_of(tok.error()).empty()) std::abort();
    return 0;
  }
  const auto encoded =
      (*tok)->encode("Once upon a time, 42 cats\n\xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80", true);
  if (!encoded) {
    if (message_of(encoded.error()).rfind(path + ": ", 0) != 0) std::abort();
    return 0;
  }
  const auto& ids = *encoded;
  for (auto id : ids)
    if (id < 0 || id >= (*tok)->vocab_size()) std::abort();
  tokenizers::incremental_detokenizer detok{*tok};
  std::string text = detok.push(ids);
  text += detok.flush();
  fuzz::require_utf8(text, "the decoded text");
  return 0;
}
