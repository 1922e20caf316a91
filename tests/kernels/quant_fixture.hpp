// The blocks of tests/fixtures/quant_blocks/ (tools/fixtures/make_quant_blocks.py): ggml's
// quantized blocks with the numbers the PyPI gguf package dequantizes them to.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/quant_blocks.hpp"

namespace conveyor::kernels::testing {

inline std::vector<uint8_t> read_bytes(const std::string& name) {
  const std::string path =
      std::string(CONVEYOR_SOURCE_DIR) + "/tests/fixtures/quant_blocks/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::vector<float> read_floats(const std::string& name) {
  const auto bytes = read_bytes(name);
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

inline std::string file_name(quant_type type) {
  switch (type) {
    case quant_type::q8_0:
      return "q8_0";
    case quant_type::q4_0:
      return "q4_0";
    case quant_type::q4_k:
      return "q4_k";
    case quant_type::q6_k:
      return "q6_k";
  }
  return "";
}

/// One type's fixture: its blocks and what gguf.quants.dequantize made of them.
struct quant_fixture {
  quant_type type;
  std::vector<uint8_t> blocks;
  std::vector<float> dequantized;

  explicit quant_fixture(quant_type t)
      : type(t),
        blocks(read_bytes(file_name(t) + ".blocks")),
        dequantized(read_floats(file_name(t) + ".f32")) {}

  int64_t count() const { return int64_t(blocks.size()) / quant_block_bytes(type); }

  /// A matrix [out, in] of the fixture's blocks (block b of row o is the fixture's
  /// (o * in / block + b + shift) % count()), and its numbers as the package dequantized them.
  void matrix(int64_t in, int64_t out, int64_t shift, std::vector<uint8_t>& w,
              std::vector<float>& numbers) const {
    const int64_t e = quant_block_elements(type), bb = quant_block_bytes(type), nb = in / e;
    w.resize(size_t(out * nb * bb));
    numbers.resize(size_t(out * in));
    for (int64_t o = 0; o < out; ++o)
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t src = (o * nb + b + shift) % count();
        std::memcpy(&w[size_t((o * nb + b) * bb)], &blocks[size_t(src * bb)], size_t(bb));
        std::memcpy(&numbers[size_t(o * in + b * e)], &dequantized[size_t(src * e)],
                    size_t(e) * sizeof(float));
      }
  }
};

inline const quant_type all_quant_types[] = {quant_type::q8_0, quant_type::q4_0, quant_type::q4_k,
                                             quant_type::q6_k};

}  // namespace conveyor::kernels::testing
