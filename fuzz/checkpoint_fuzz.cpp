// Fuzz target: a llama2.c checkpoint's header and sizes. Arbitrary bytes either load as weights
// whose shape the file's size backs, or give an error naming the file.
#include <cstdlib>

#include "fuzz/fuzz_support.hpp"
#include "model/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  const auto path = fuzz::write_scratch(data, size, ".bin");
  auto shape = model::read_llama2c_shape(path);
  auto weights = model::load_llama2c_checkpoint(path);
  if (bool(shape) != bool(weights)) std::abort();  // the two readers agree on what is valid
  if (!weights && message_of(weights.error()).find(path) == std::string::npos) std::abort();
  return 0;
}
