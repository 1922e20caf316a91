// Compiles requests' output constraints (JSON schemas, regexes, choices, EBNF grammars) against
// the served model's vocabulary, with a cache and limits.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/error.hpp"
#include "grammar/compiled_grammar.hpp"
#include "sampling/structured_output.hpp"
#include "tokenizers/tokenizer.hpp"

namespace conveyor::grammar {

/// The limits of compilation (configuration: `[structured_outputs]`).
struct compile_limits {
  /// Bytes of a schema, regex or grammar, or of a choice list's strings together.
  std::size_t max_spec_bytes = std::size_t{256} << 10;
  /// Strings of a choice list.
  std::size_t max_choices = 4096;
  /// How long a request waits for its grammar's compilation.
  std::chrono::milliseconds timeout{10000};
  /// Compilations at once, those past their time limit included.
  int32_t max_compiling = 4;
  /// Bytes of compiled grammars kept for reuse (least recently used go first).
  int64_t cache_bytes = int64_t{256} << 20;
  /// Threads of one compilation (xgrammar computes the token masks of a grammar's states in
  /// parallel).
  int32_t threads = 1;
};

/// Turns a request's `structured_output` into a compiled_grammar for the model whose vocabulary
/// `tokenizer` spells (its token bytes; control tokens and the ids past the tokenizer's, up to
/// `vocab_size`, can never be generated inside the format). Compilations run on threads of
/// their own within `compile_limits`; a constraint compiled before comes from the cache (keyed
/// by its kind and source; least recently used dropped beyond `cache_bytes`) at once, on the
/// caller's thread. Thread-safe: one compiler serves every tokenizer worker and executor of a
/// model.
class grammar_compiler {
 public:
  grammar_compiler(const tokenizers::tokenizer& tokenizer, int32_t vocab_size,
                   compile_limits limits = {});
  ~grammar_compiler();
  grammar_compiler(const grammar_compiler&) = delete;
  grammar_compiler& operator=(const grammar_compiler&) = delete;

  /// The compiled form of `c` (which must be active). A constraint past a size limit, one the
  /// engine cannot compile (a malformed schema or grammar, an unsupported schema keyword), or a
  /// compilation past the time limit gives ec::bad_request whose message starts with c.field:
  /// "'response_format': the JSON schema cannot be compiled: ...".
  expected<std::shared_ptr<const compiled_grammar>> compile(
      const sampling::structured_output& c) const;


  /// Bytes the cache holds.
  int64_t cache_bytes() const;


 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace conveyor::grammar
