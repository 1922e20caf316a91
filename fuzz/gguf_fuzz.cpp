// Fuzz target: a GGUF file (header, typed metadata, tensor descriptions, aligned data). Arbitrary
// bytes either open, and then every value reads back, every tensor lies inside the file where its
// description says and every byte of it can be read, or give an error naming the file.
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz/fuzz_support.hpp"
#include "gguf/gguf_file.hpp"

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
  return 0;
}
