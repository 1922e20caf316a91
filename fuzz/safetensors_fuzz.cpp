// Fuzz target: a safetensors file (8-byte header length, JSON header, data). Arbitrary bytes
// either open, and then every tensor reads as f32 within the file, or give an error.
#include <cstdlib>
#include <vector>

#include "fuzz/fuzz_support.hpp"
#include "model/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  const auto path = fuzz::write_scratch(data, size, ".safetensors");
  auto file = model::safetensors_file::open(path);
  if (!file) {
    if (message_of(file.error()).empty()) std::abort();
    return 0;
  }
  std::vector<float> out;
  for (const auto& [name, entry] : (*file)->tensors()) {
    if (entry.elements() > int64_t(size)) std::abort();  // more elements than bytes in the file
    out.resize(size_t(entry.elements()));
    auto err = (*file)->read_f32(name, out.data());
    (void)err;  // unsupported dtypes are refused; what matters is reading stays in bounds
  }
  return 0;
}
