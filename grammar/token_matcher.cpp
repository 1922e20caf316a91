#include "grammar/token_matcher.hpp"

#include <algorithm>
#include <exception>
#include <limits>

#include <dlpack/dlpack.h>
#include <xgrammar/matcher.h>

#include "grammar/compiled_grammar_impl.hpp"

namespace conveyor::grammar {

struct token_matcher::impl {
  impl(std::shared_ptr<const compiled_grammar> g, std::vector<int32_t> ends)
      : grammar(std::move(g)),
        vocab_size(grammar->get().vocab_size),
        end_ids(std::move(ends)),
        // A sequence without end tokens (ignore_eos) ends when its format allows nothing more.
        matcher(grammar->get().compiled, end_ids.empty()
                                             ? std::nullopt
                                             : std::optional<std::vector<int>>{std::vector<int>(
                                                   end_ids.begin(), end_ids.end())}),
        mask(std::size_t(xgrammar::GetBitmaskSize(vocab_size)), 0) {}

  std::shared_ptr<const compiled_grammar> grammar;
  int32_t vocab_size;
  std::vector<int32_t> end_ids;
  xgrammar::GrammarMatcher matcher;
  /// Bit `id % 32` of word `id / 32` set: `id` may come next.
  std::vector<int32_t> mask;
  int64_t shape = 0;

  bool bit(int32_t id) const {
    return id >= 0 && id < vocab_size &&
           ((uint32_t(mask[std::size_t(id) / 32]) >> (uint32_t(id) % 32)) & 1u) != 0;
  }
};

token_matcher::token_matcher(std::shared_ptr<const compiled_grammar> grammar,
                             std::vector<int32_t> end_ids)
    : impl_(std::make_unique<impl>(std::move(grammar), std::move(end_ids))) {}

token_matcher::~token_matcher() = default;
token_matcher::token_matcher(token_matcher&&) noexcept = default;
token_matcher& token_matcher::operator=(token_matcher&&) noexcept = default;

bool token_matcher::update_mask() {
  auto& m = *impl_;
  impl_->shape = int64_t(m.mask.size());
  DLTensor t{};
  t.data = m.mask.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = DLDataType{kDLInt, 32, 1};
  t.shape = &impl_->shape;
  try {
    m.matcher.FillNextTokenBitmask(&t);
  } catch (const std::exception& e) {
    failure_ = e.what();
    std::fill(m.mask.begin(), m.mask.end(), 0);
    finished_ = true;
    return false;
  }
  // Finished when no token but an end token may come: the mask without the end ids is empty.
  bool other = false;
  for (std::size_t w = 0; w < m.mask.size() && !other; ++w) {
    uint32_t word = uint32_t(m.mask[w]);
    for (int32_t id : m.end_ids)
      if (id >= 0 && std::size_t(id) / 32 == w) word &= ~(1u << (uint32_t(id) % 32));
    other = word != 0;
  }
  finished_ = !other;
  return true;
}

void token_matcher::apply_mask(float* row, int32_t vocab) const {
  const auto& m = *impl_;
  constexpr float minus_inf = -std::numeric_limits<float>::infinity();
  const int32_t n = std::min(vocab, m.vocab_size);
  for (int32_t w = 0; w * 32 < n; ++w) {
    const uint32_t word = uint32_t(m.mask[std::size_t(w)]);
    if (word == 0xffffffffu) continue;
    const int32_t end = std::min(n, w * 32 + 32);
    for (int32_t id = w * 32; id < end; ++id)
      if (((word >> uint32_t(id - w * 32)) & 1u) == 0) row[id] = minus_inf;
  }
  for (int32_t id = n; id < vocab; ++id) row[id] = minus_inf;
}

bool token_matcher::allows(int32_t token) const {
  return impl_->bit(token);
}

bool token_matcher::accept(int32_t token) {
  try {
    if (!impl_->matcher.AcceptToken(token)) return false;
  } catch (const std::exception& e) {
    failure_ = e.what();
    return false;
  }
  return true;
}

}  // namespace conveyor::grammar
