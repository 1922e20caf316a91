// The syntax tree of a chat template: expressions and statements of the Jinja subset that
// chat templates use, as the parser builds them and the renderer walks them.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.hpp"

namespace conveyor::chat {

/// The deepest a template may nest: blocks and parenthesized expressions together while
/// parsing, the syntax tree of one expression, and lists and maps while rendering. Deeper is an
/// error (rendering recurses that deep).
inline constexpr int max_template_nesting = 100;

struct expr;
/// Expressions own their operands.
using expr_ptr = std::unique_ptr<expr>;

/// One expression node.
struct expr {
  enum class kind {
    literal,    // `lit`
    name,       // variable `name`
    attribute,  // args[0].name
    item,       // args[0][args[1]]
    slice,      // args[0][args[1]:args[2]:args[3]] (null operands are omitted bounds)
    call,       // global function `name` (raise_exception, namespace, range, strftime_now)
    macro,      // a call of the template's macro `name` with args, kwargs
    method,     // args[0].name(args[1..]) (strip, startswith, items, get, ...)
    filter,     // args[0] | name(args[1..], kwargs)
    test,       // args[0] is [not] name(args[1..]); `negated` for "is not"
    negate,     // not args[0]
    unary_minus,
    binary,  // args[0] `name` args[1]: + - * / // % ** ~ == != < <= > >= in "not in"
    logical_and,
    logical_or,
    conditional,  // args[0] if args[1] else args[2] (args[2] may be null)
    list,         // [args...] (tuples too)
    dict,         // {args[0]: args[1], args[2]: args[3], ...}
  };
  kind type = kind::literal;
  /// The 1-based line where it starts.
  int line = 1;
  /// The height of the tree below and including this node (at most max_template_nesting).
  int depth = 1;
  value lit;
  std::string name;
  bool negated = false;
  std::vector<expr_ptr> args;
  std::vector<std::pair<std::string, expr_ptr>> kwargs;
};

struct node;
/// A sequence of statements.
using node_list = std::vector<std::unique_ptr<node>>;

/// One statement (or a piece of text).
struct node {
  enum class kind {
    text,      // literal output `text`
    output,    // {{ value }}
    if_chain,  // if/elif.../else: conditions[i] guards bodies[i]; else_body
    for_loop,  // for targets in value [if condition]: body, else_body
    set,       // set targets[0] = value, or set targets[0].attribute = value
    break_loop,
    continue_loop,
    macro,  // macro targets[0](targets[1..] = conditions[..]): body
  };
  kind type = kind::text;
  int line = 1;
  std::string text;
  expr_ptr value;
  std::vector<expr_ptr> conditions;
  std::vector<node_list> bodies;
  node_list body;
  node_list else_body;
  /// Loop variables (one, or two for `for k, v in ...`), the set's target, or a macro's name
  /// and then its parameters (whose defaults, or null, are `conditions`).
  std::vector<std::string> targets;
  /// For `set ns.attr = ...`: the attribute; empty for a plain set.
  std::string attribute;
  /// A for loop's filter (`for x in xs if cond`), or null.
  expr_ptr condition;
};

/// A parsed template.
struct template_program {
  node_list body;
};

}  // namespace conveyor::chat
