// A tokenizer with a handful of fixed tokens, for tests of what turns ids into text without a
// model: the output processor, the scheduler.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizers/tokenizer.hpp"

namespace conveyor::test {

/// Ids: 0 <unk>, 1 BOS, 2 EOS (control tokens: no bytes), then the pieces of `pieces()` from id 3
/// on: "Hel", "lo", " wor", "ld", "!", the two halves of "€" (E2 | 82 AC), and more tokens up to
/// vocab_size() that spell "x". Encoding is not needed by these tests.
class fake_tokenizer final : public tokenizers::tokenizer {
 public:
  static constexpr int32_t bos = 1;
  static constexpr int32_t eos = 2;
  static constexpr int32_t hel = 3;
  static constexpr int32_t lo = 4;
  static constexpr int32_t wor = 5;
  static constexpr int32_t ld = 6;
  static constexpr int32_t bang = 7;
  static constexpr int32_t euro_head = 8;  // E2
  static constexpr int32_t euro_tail = 9;  // 82 AC
  static constexpr int32_t vocab = 32;

  expected<std::vector<int32_t>> encode(std::string_view, bool add_bos) const override {
    return add_bos ? std::vector<int32_t>{bos} : std::vector<int32_t>{};
  }

  std::string token_bytes(int32_t id) const override {
    static const std::vector<std::string> pieces = {"",     "",   "",  "Hel",  "lo",
                                                    " wor", "ld", "!", "\xE2", "\x82\xAC"};
    if (id < 0 || id >= vocab) return "";
    return size_t(id) < pieces.size() ? pieces[size_t(id)] : "x";
  }

  int32_t vocab_size() const override { return vocab; }
  int32_t bos_id() const override { return bos; }
  int32_t eos_id() const override { return eos; }
};

}  // namespace conveyor::test
