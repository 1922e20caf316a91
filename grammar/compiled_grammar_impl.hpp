// What a compiled_grammar holds: xgrammar's compiled grammar and the width of the logits rows
// its masks cover. Included only by grammar/'s sources.
#pragma once

#include <cstdint>

#include <xgrammar/compiler.h>

#include "grammar/compiled_grammar.hpp"

namespace conveyor::grammar {

struct compiled_grammar::impl {
  xgrammar::CompiledGrammar compiled;
  /// Ids in the vocabulary of the masks (the model's logits row).
  int32_t vocab_size = 0;
};

}  // namespace conveyor::grammar
