// Follows one sequence's tokens through its compiled grammar and masks the tokens that would
// leave it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.hpp"

namespace conveyor::grammar {

/// The state of one sequence inside its grammar: which tokens may come next (a bitmask over the
/// vocabulary), updated token by token. `end_ids` are the sequence's end tokens: allowed exactly
/// where the grammar may end. One per sequence; not thread-safe, but `update_mask` may run on
/// another thread than the rest as long as the two never overlap.
class token_matcher {
 public:
  token_matcher(std::shared_ptr<const compiled_grammar> grammar, std::vector<int32_t> end_ids);
  ~token_matcher();
  token_matcher(token_matcher&&) noexcept;
  token_matcher& operator=(token_matcher&&) noexcept;

  /// Computes the mask of the next token from the tokens accepted so far. Called once before
  /// the first token and after each accepted one; `apply_mask` and `finished` read its result.
  /// False when the engine failed (its error in `failure()`): the mask then allows nothing.
  bool update_mask();

  /// What the engine said when `update_mask` or `accept` failed; empty otherwise.
  const std::string& failure() const { return failure_; }

  /// Sets every logit of `row` (`vocab` wide) whose token the mask forbids to -inf. Ids past the
  /// grammar's vocabulary are forbidden too.
  void apply_mask(float* row, int32_t vocab) const;

  /// Whether the mask allows `token`.
  bool allows(int32_t token) const;

  /// Takes `token` (sampled from a masked row, or an end token) as the next of the sequence.
  /// False when the grammar does not allow it (the state is then unchanged) or the engine
  /// failed (`failure()`).
  bool accept(int32_t token);

  /// Whether the output is complete and nothing but an end token may follow: the sequence ends
  /// here ("stop"), with or without an end token. Reads the last `update_mask`.
  bool finished() const { return finished_; }


 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  bool finished_ = false;
  std::string failure_;
};

}  // namespace conveyor::grammar
