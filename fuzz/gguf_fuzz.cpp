// Fuzz target: a GGUF file (header, typed metadata, tensor descriptions, aligned data). Arbitrary
// bytes either open, and then every value reads back, every tensor lies inside the file where its
// description says and every byte of it can be read, or give an error naming the file. A file
// that opens then goes through what reads it after the reader: its tokenizer (read, built and,
// when built, run on a short text whose ids must be in the vocabulary) and
// the model's description (read_gguf_info); each either succeeds or gives an error naming the
// file.
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz/fuzz_support.hpp"
#include "gguf/gguf_file.hpp"
#include "model/gguf_model.hpp"
#include "tokenizers/gguf_tokenizer.hpp"

namespace {

// Reads every part of `v` through the public getters (ASan sees any read out of bounds).
size_t touch(const conveyor::gguf::value& v) {
  size_t n = v.describe().size();
  (void)v.as_int();
  (void)v.as_float();
  (void)v.as_bool();
  if (auto s = v.as_string()) n += s->size();
  if (auto s = v.strings()) n += s->size();
  if (auto f = v.floats()) n += f->size();
  if (auto i = v.ints()) n += i->size();
  for (size_t i = 0; i < v.size(); ++i) n += touch(v.at(i));
  return n;
}

// Aborts unless `message` opens with "PATH: " (every error names the file).
void require_named(const std::string& message, const std::string& path) {
  if (message.rfind(path + ": ", 0) != 0) std::abort();
}

// The tokenizer of the file: read, built, and run on a short text with and without its special
// tokens; the ids lie in the vocabulary and their bytes can be read.
void tokenize(const conveyor::gguf::gguf_file& file) {
  using namespace conveyor;
  auto vocab = tokenizers::read_gguf_vocabulary(file);
  if (!vocab) return require_named(message_of(vocab.error()), file.path());
  (void)tokenizers::gguf_tokenizer_config(*vocab);
  auto tok = tokenizers::make_gguf_tokenizer(*vocab, file.path());
  if (!tok) return require_named(message_of(tok.error()), file.path());
  for (bool special : {false, true}) {
    auto ids = (*tok)->encode("Once upon a time, \xc3\xa9t\xc3\xa9 <s> 12", special);
    if (!ids) continue;  // a text the tokenizer cannot finish is refused, not a finding
    for (const int32_t id : *ids) {
      if (id < 0 || id >= (*tok)->vocab_size()) std::abort();
      (void)(*tok)->token_bytes(id);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  const auto path = fuzz::write_scratch(data, size, ".gguf");
  auto opened = gguf::gguf_file::open(path);
  if (!opened) {
    if (message_of(opened.error()).rfind(path + ": ", 0) != 0) std::abort();
    return 0;
  }
  const auto& file = **opened;
  size_t seen = 0;
  for (const auto& [key, v] : file.metadata()) {
    if (key.empty() || file.find(key) != &v) std::abort();
    seen += touch(v);
  }
  const uint64_t alignment = file.alignment();
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) std::abort();
  unsigned sum = 0;
  for (const auto& t : file.tensors()) {
    const auto traits = gguf::traits_of(t.type);
    if (!traits || t.dims.empty() || t.dims.size() > 4 || file.tensor(t.name) != &t) std::abort();
    if (t.offset % alignment != 0 || t.dims[0] % traits->block_elements != 0) std::abort();
    if (t.bytes != uint64_t(t.elements() / traits->block_elements * traits->block_bytes))
      std::abort();
    // Inside the file, and the bytes the file holds there.
    const uint64_t begin = file.data_offset() + t.offset;
    if (uint64_t(file.size()) != size || begin + t.bytes > size ||
        std::memcmp(t.data, data + begin, t.bytes) != 0)
      std::abort();
    for (uint64_t i = 0; i < t.bytes; ++i) sum += t.data[i];
    file.release(t);
    for (uint64_t i = 0; i < t.bytes; ++i) sum -= t.data[i];  // read back from the file
  }
  if (sum != 0) std::abort();
  (void)seen;
  tokenize(file);
  auto info = model::read_gguf_info(path);
  if (!info) require_named(message_of(info.error()), path);
  return 0;
}
