// What a builtin of a chat template (a filter, a test, a method, range()) gets from its call:
// its node, whose arguments it evaluates when it reads them, and the rendering's budget.
#pragma once

#include <cstddef>
#include <string>

#include "chat/render_budget.hpp"
#include "chat/template_ast.hpp"
#include "chat/value.hpp"

namespace conveyor::chat {

/// Evaluates expressions (the renderer does).
class expression_evaluator {
 public:
  /// The value of `e` in the current scope.
  virtual value eval(const expr& e) = 0;

 protected:
  ~expression_evaluator() = default;
};

/// One call of a builtin. For a method, filter or test, args[0] of `e` is its subject and the
/// arguments count from 1.
struct builtin_call {
  const expr& e;
  expression_evaluator& evaluator;
  render_budget& budget;

  /// The line of the call.
  int line() const { return e.line; }

  /// Argument `position`, else the keyword argument `name`, else `dflt`; evaluated now (an
  /// argument a builtin never reads is never evaluated).
  value argument(std::size_t position, const char* name, value dflt = {}) const;

  /// The same, which must be a string: else an error naming `what`.
  std::string string_argument(std::size_t position, const char* name, const char* what) const;
};

}  // namespace conveyor::chat
