// A constraint compiled against one vocabulary: what a token_matcher follows. Opaque, so that
// xgrammar's headers stay inside grammar/.
#pragma once

#include <cstddef>
#include <memory>

namespace conveyor::grammar {

/// One compiled constraint, immutable and shared by every sequence that asks for it (and by the
/// compile cache).
class compiled_grammar {
 public:
  struct impl;
  explicit compiled_grammar(std::shared_ptr<const impl> p) : impl_(std::move(p)) {}

  /// Approximate bytes held (the grammar and its token mask cache).
  std::size_t memory_bytes() const;

  const impl& get() const { return *impl_; }

 private:
  std::shared_ptr<const impl> impl_;
};

}  // namespace conveyor::grammar
