#include "chat/template_parser.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>

namespace conveyor::chat {

namespace {

using tk = template_token::kind;

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

class parser {
 public:
  explicit parser(std::vector<template_token> tokens) : tokens_(std::move(tokens)) {}

  template_program run() {
    template_program program;
    std::string stop;
    program.body = parse_body({}, stop);
    return program;
  }

 private:
  // -- tokens ----------------------------------------------------------------------------------

  const template_token& peek(std::size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const template_token& next() {
    const auto& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  bool at_op(std::string_view op, std::size_t ahead = 0) const {
    return peek(ahead).type == tk::op && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, std::size_t ahead = 0) const {
    return peek(ahead).type == tk::name && peek(ahead).text == name;
  }
  bool accept_op(std::string_view op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }

  [[noreturn]] void fail(int line, const std::string& what) const { fail_at_line(line, what); }

  [[noreturn]] void too_deep(int line) const {
    fail(line, "nested more than " + std::to_string(max_template_nesting) + " deep");
  }

  // Counts one level of nesting (a block, a parenthesized or bracketed expression, a `not` or a
  // sign) while the parser recurses into it.
  class nesting {
   public:
    nesting(parser& p, int line) : p_(p) {
      if (++p_.nesting_ > max_template_nesting) p_.too_deep(line);
    }
    ~nesting() { --p_.nesting_; }
    nesting(const nesting&) = delete;
    nesting& operator=(const nesting&) = delete;

   private:
    parser& p_;
  };

  // Makes `child` (may be null) an operand of `parent`, keeping the tree's height in bounds:
  // loops build left-deep trees (1 + 1 + 1 ...) without recursing.
  void adopt(expr& parent, expr_ptr child) {
    if (child) {
      parent.depth = std::max(parent.depth, child->depth + 1);
      if (parent.depth > max_template_nesting) too_deep(parent.line);
    }
    parent.args.push_back(std::move(child));
  }

  void adopt(expr& parent, std::string key, expr_ptr child) {
    parent.depth = std::max(parent.depth, child->depth + 1);
    if (parent.depth > max_template_nesting) too_deep(parent.line);
    parent.kwargs.emplace_back(std::move(key), std::move(child));
  }

  // A 64-bit integer literal; Python's would be unbounded.
  int64_t integer(const template_token& t) const {
    errno = 0;
    const long long i = std::strtoll(t.text.c_str(), nullptr, 10);
    if (errno == ERANGE)
      fail(t.line, "integer literal " + t.text + " is out of range of a 64-bit integer");
    return static_cast<int64_t>(i);
  }

  static std::string describe(const template_token& t) {
    switch (t.type) {
      case tk::text:
        return "text";
      case tk::variable_begin:
        return "'{{'";
      case tk::variable_end:
        return "'}}'";
      case tk::block_begin:
        return "'{%'";
      case tk::block_end:
        return "'%}'";
      case tk::end:
        return "the end of the template";
      case tk::string:
        return "a string";
      default:
        return "'" + t.text + "'";
    }
  }

  void expect_op(std::string_view op) {
    if (!accept_op(op))
      fail(peek().line, "expected '" + std::string{op} + "', found " + describe(peek()));
  }
  std::string expect_name() {
    if (peek().type != tk::name) fail(peek().line, "expected a name, found " + describe(peek()));
    return next().text;
  }
  void expect_block_end() {
    if (peek().type != tk::block_end)
      fail(peek().line, "expected '%}', found " + describe(peek()));
    next();
  }

  // -- statements ------------------------------------------------------------------------------

  // Parses until one of the `stops` tags (its name is left in `stop`, the tag's name consumed)
  // or the end of the template (only when `stops` is empty).
  node_list parse_body(std::initializer_list<std::string_view> stops, std::string& stop) {
    node_list body;
    while (true) {
      const auto& t = peek();
      if (t.type == tk::end) {
        if (stops.size() != 0)
          fail(t.line, "missing '{% " + std::string{*stops.begin()} + " %}'");
        return body;
      }
      if (t.type == tk::text) {
        auto n = std::make_unique<node>();
        n->type = node::kind::text;
        n->line = t.line;
        n->text = next().text;
        body.push_back(std::move(n));
      } else if (t.type == tk::variable_begin) {
        next();
        auto n = std::make_unique<node>();
        n->type = node::kind::output;
        n->line = t.line;
        n->value = parse_expression();
        if (peek().type != tk::variable_end)
          fail(peek().line, "expected '}}', found " + describe(peek()));
        next();
        body.push_back(std::move(n));
      } else if (t.type == tk::block_begin) {
        next();
        const auto& name_token = peek();
        if (name_token.type != tk::name)
          fail(name_token.line, "expected a tag name, found " + describe(name_token));
        if (std::find(stops.begin(), stops.end(), name_token.text) != stops.end()) {
          stop = next().text;
          return body;
        }
        body.push_back(parse_statement());
      } else {
        fail(t.line, "unexpected " + describe(t));
      }
    }
  }

  std::unique_ptr<node> parse_statement() {
    const auto& t = next();
    const nesting level{*this, t.line};
    auto n = std::make_unique<node>();
    n->line = t.line;
    if (t.text == "if") {
      n->type = node::kind::if_chain;
      n->conditions.push_back(parse_expression());
      expect_block_end();
      while (true) {
        std::string stop;
        n->bodies.push_back(parse_body({"endif", "elif", "else"}, stop));
        if (stop == "elif") {
          n->conditions.push_back(parse_expression());
          expect_block_end();
          continue;
        }
        if (stop == "else") {
          expect_block_end();
          n->else_body = parse_body({"endif"}, stop);
        }
        expect_block_end();
        return n;
      }
    }
    if (t.text == "for") {
      n->type = node::kind::for_loop;
      n->targets.push_back(expect_name());
      while (accept_op(",")) n->targets.push_back(expect_name());
      if (n->targets.size() > 2) fail(t.line, "unsupported: more than two loop variables");
      if (!accept_name("in")) fail(peek().line, "expected 'in', found " + describe(peek()));
      n->value = parse_or_expression();
      if (accept_name("if")) n->condition = parse_or_expression();
      if (at_name("recursive")) fail(peek().line, "unsupported loop modifier 'recursive'");
      expect_block_end();
      std::string stop;
      ++loop_depth_;
      n->body = parse_body({"endfor", "else"}, stop);
      --loop_depth_;
      if (stop == "else") {
        expect_block_end();
        n->else_body = parse_body({"endfor"}, stop);
      }
      expect_block_end();
      return n;
    }
    if (t.text == "set") {
      n->type = node::kind::set;
      n->targets.push_back(expect_name());
      if (accept_op(".")) n->attribute = expect_name();
      if (at_op(",")) fail(peek().line, "unsupported: assigning to several names in 'set'");
      if (peek().type == tk::block_end) fail(t.line, "unsupported tag 'set' with a body");
      expect_op("=");
      n->value = parse_expression();
      expect_block_end();
      return n;
    }
    if (t.text == "macro") {
      // macro name(a, b=default): a function of the template that returns what its body
      // renders. Declared before its body is parsed, so that it may call itself.
      n->type = node::kind::macro;
      n->targets.push_back(expect_name());
      macros_.push_back(n->targets[0]);
      expect_op("(");
      while (!at_op(")")) {
        n->targets.push_back(expect_name());
        n->conditions.push_back(accept_op("=") ? parse_expression() : nullptr);
        if (!accept_op(",")) break;
      }
      expect_op(")");
      expect_block_end();
      std::string stop;
      const int loops = loop_depth_;
      loop_depth_ = 0;  // a loop around the definition is not the body's
      n->body = parse_body({"endmacro"}, stop);
      loop_depth_ = loops;
      if (!at_op(")") && peek().type == tk::name) next();  // {% endmacro name %}
      expect_block_end();
      return n;
    }
    if (t.text == "break" || t.text == "continue") {
      if (loop_depth_ == 0) fail(t.line, "'" + t.text + "' outside a loop");
      n->type = t.text == "break" ? node::kind::break_loop : node::kind::continue_loop;
      expect_block_end();
      return n;
    }
    if (one_of(t.text, {"endif", "endfor", "elif", "else", "endset", "endmacro"}))
      fail(t.line, "unexpected '{% " + t.text + " %}'");
    fail(t.line, "unsupported tag '" + t.text + "'");
  }

  // -- expressions -----------------------------------------------------------------------------

  expr_ptr make(expr::kind kind, int line) {
    auto e = std::make_unique<expr>();
    e->type = kind;
    e->line = line;
    return e;
  }

  // expression := or_expr ['if' or_expr ['else' expression]]
  expr_ptr parse_expression() {
    const nesting level{*this, peek().line};
    auto e = parse_or_expression();
    while (at_name("if")) {
      int line = next().line;
      auto c = make(expr::kind::conditional, line);
      adopt(*c, std::move(e));
      adopt(*c, parse_or_expression());
      adopt(*c, accept_name("else") ? parse_expression() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  // An expression without the `x if c else y` form: a for loop's iterable may not swallow the
  // loop's `if` filter.
  expr_ptr parse_or_expression() {
    auto left = parse_and();
    while (at_name("or")) {
      auto e = make(expr::kind::logical_or, next().line);
      adopt(*e, std::move(left));
      adopt(*e, parse_and());
      left = std::move(e);
    }
    return left;
  }

  expr_ptr parse_and() {
    auto left = parse_not();
    while (at_name("and")) {
      auto e = make(expr::kind::logical_and, next().line);
      adopt(*e, std::move(left));
      adopt(*e, parse_not());
      left = std::move(e);
    }
    return left;
  }

  expr_ptr parse_not() {
    if (at_name("not")) {
      const nesting level{*this, peek().line};
      auto e = make(expr::kind::negate, next().line);
      adopt(*e, parse_not());
      return e;
    }
    return parse_compare();
  }

  expr_ptr parse_compare() {
    auto left = parse_math1();
    while (true) {
      std::string op;
      int line = peek().line;
      if (peek().type == tk::op && one_of(peek().text, {"==", "!=", "<", "<=", ">", ">="})) {
        op = next().text;
      } else if (at_name("in")) {
        next();
        op = "in";
      } else if (at_name("not") && at_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        return left;
      }
      auto e = make(expr::kind::binary, line);
      e->name = op;
      adopt(*e, std::move(left));
      adopt(*e, parse_math1());
      left = std::move(e);
    }
  }

  expr_ptr binary(std::string op, int line, expr_ptr l, expr_ptr r) {
    auto e = make(expr::kind::binary, line);
    e->name = std::move(op);
    adopt(*e, std::move(l));
    adopt(*e, std::move(r));
    return e;
  }

  expr_ptr parse_math1() {
    auto left = parse_concat();
    while (at_op("+") || at_op("-")) {
      const auto& t = next();
      left = binary(t.text, t.line, std::move(left), parse_concat());
    }
    return left;
  }

  expr_ptr parse_concat() {
    auto left = parse_math2();
    while (at_op("~")) {
      const auto& t = next();
      left = binary("~", t.line, std::move(left), parse_math2());
    }
    return left;
  }

  expr_ptr parse_math2() {
    auto left = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const auto& t = next();
      left = binary(t.text, t.line, std::move(left), parse_pow());
    }
    return left;
  }

  expr_ptr parse_pow() {
    auto left = parse_unary(true);
    while (at_op("**")) {
      const auto& t = next();
      left = binary("**", t.line, std::move(left), parse_unary(true));
    }
    return left;
  }

  expr_ptr parse_unary(bool with_filter) {
    expr_ptr e;
    if (at_op("-")) {
      const nesting level{*this, peek().line};
      e = make(expr::kind::unary_minus, next().line);
      adopt(*e, parse_unary(false));
    } else if (at_op("+")) {
      const nesting level{*this, peek().line};
      next();
      e = parse_unary(false);
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filters(std::move(e));
    return e;
  }

  expr_ptr parse_primary() {
    const auto& t = next();
    switch (t.type) {
      case tk::name: {
        if (one_of(t.text, {"true", "True"})) return literal(value{true}, t.line);
        if (one_of(t.text, {"false", "False"})) return literal(value{false}, t.line);
        if (one_of(t.text, {"none", "None"})) return literal(value::none(), t.line);
        auto e = make(expr::kind::name, t.line);
        e->name = t.text;
        return e;
      }
      case tk::string: {
        std::string s = t.text;
        while (peek().type == tk::string) s += next().text;  // adjacent literals join
        return literal(value{std::move(s)}, t.line);
      }
      case tk::integer:
        return literal(value{integer(t)}, t.line);
      case tk::floating:
        return literal(value{std::strtod(t.text.c_str(), nullptr)}, t.line);
      case tk::op:
        if (t.text == "(") {
          if (accept_op(")")) return make(expr::kind::list, t.line);
          auto first = parse_expression();
          if (!at_op(",")) {
            expect_op(")");
            return first;
          }
          auto tuple = make(expr::kind::list, t.line);
          adopt(*tuple, std::move(first));
          while (accept_op(",")) {
            if (at_op(")")) break;
            adopt(*tuple, parse_expression());
          }
          expect_op(")");
          return tuple;
        }
        if (t.text == "[") {
          auto list = make(expr::kind::list, t.line);
          while (!at_op("]")) {
            adopt(*list, parse_expression());
            if (!accept_op(",")) break;
          }
          expect_op("]");
          return list;
        }
        if (t.text == "{") {
          auto dict = make(expr::kind::dict, t.line);
          while (!at_op("}")) {
            adopt(*dict, parse_expression());
            expect_op(":");
            adopt(*dict, parse_expression());
            if (!accept_op(",")) break;
          }
          expect_op("}");
          return dict;
        }
        break;
      default:
        break;
    }
    fail(t.line, "unexpected " + describe(t) + " in an expression");
  }

  expr_ptr literal(value v, int line) {
    auto e = make(expr::kind::literal, line);
    e->lit = std::move(v);
    return e;
  }

  // Arguments after '(' up to ')': positional ones, then name=value ones.
  void parse_arguments(expr& e) {
    while (!at_op(")")) {
      if (peek().type == tk::name && at_op("=", 1)) {
        auto key = next().text;
        next();
        adopt(e, key, parse_expression());
      } else {
        if (!e.kwargs.empty())
          fail(peek().line, "a positional argument after a keyword argument");
        adopt(e, parse_expression());
      }
      if (!accept_op(",")) break;
    }
    expect_op(")");
  }

  expr_ptr parse_postfix(expr_ptr e) {
    while (true) {
      if (at_op(".")) {
        int line = next().line;
        const auto& t = next();
        if (t.type == tk::integer) {  // foo.0 is foo[0]
          auto item = make(expr::kind::item, line);
          adopt(*item, std::move(e));
          adopt(*item, literal(value{integer(t)}, line));
          e = std::move(item);
          continue;
        }
        if (t.type != tk::name) fail(line, "expected an attribute name after '.'");
        if (at_op("(")) {
          next();
          if (!is_supported_method(t.text)) fail(line, "unsupported method '" + t.text + "'");
          auto m = make(expr::kind::method, line);
          m->name = t.text;
          adopt(*m, std::move(e));
          parse_arguments(*m);
          e = std::move(m);
          continue;
        }
        auto a = make(expr::kind::attribute, line);
        a->name = t.text;
        adopt(*a, std::move(e));
        e = std::move(a);
      } else if (at_op("[")) {
        int line = next().line;
        expr_ptr parts[3];
        bool is_slice = false;
        for (int i = 0; i < 3; ++i) {
          if (!at_op(":") && !at_op("]")) parts[i] = parse_expression();
          if (i < 2 && accept_op(":")) {
            is_slice = true;
            continue;
          }
          break;
        }
        expect_op("]");
        auto s = make(is_slice ? expr::kind::slice : expr::kind::item, line);
        adopt(*s, std::move(e));
        if (!is_slice && !parts[0]) fail(line, "empty subscript");
        adopt(*s, std::move(parts[0]));
        if (is_slice) {
          adopt(*s, std::move(parts[1]));
          adopt(*s, std::move(parts[2]));
        }
        e = std::move(s);
      } else if (at_op("(")) {
        int line = next().line;
        if (e->type != expr::kind::name)
          fail(line, "unsupported call of something other than a global function");
        const bool macro = std::find(macros_.begin(), macros_.end(), e->name) != macros_.end();
        if (!macro && !is_supported_function(e->name))
          fail(line, "unsupported function '" + e->name + "'");
        auto c = make(macro ? expr::kind::macro : expr::kind::call, line);
        c->name = e->name;
        parse_arguments(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  expr_ptr parse_filters(expr_ptr e) {
    while (true) {
      if (at_op("|")) {
        int line = next().line;
        auto f = make(expr::kind::filter, line);
        f->name = expect_name();
        if (!is_supported_filter(f->name)) fail(line, "unsupported filter '" + f->name + "'");
        adopt(*f, std::move(e));
        if (accept_op("(")) parse_arguments(*f);
        e = std::move(f);
      } else if (at_name("is")) {
        int line = next().line;
        auto t = make(expr::kind::test, line);
        t->negated = accept_name("not");
        const auto& name = next();
        if (name.type != tk::name && !(name.type == tk::op && one_of(name.text, {"==", "!="})))
          fail(line, "expected a test name after 'is'");
        t->name = name.text;
        if (!is_supported_test(t->name)) fail(line, "unsupported test '" + t->name + "'");
        adopt(*t, std::move(e));
        if (accept_op("(")) {
          parse_arguments(*t);
        } else if (peek().type == tk::string || peek().type == tk::integer ||
                   peek().type == tk::floating ||
                   (peek().type == tk::name && !one_of(peek().text, {"and", "or", "if", "else",
                                                                      "not", "in", "is"}))) {
          // `x is sameas y`, `x is divisibleby 3`
          adopt(*t, parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  std::vector<template_token> tokens_;
  std::size_t pos_ = 0;
  int loop_depth_ = 0;
  int nesting_ = 0;
  // The macros declared so far: a call of one of these names calls it.
  std::vector<std::string> macros_;
};

}  // namespace

bool is_supported_filter(std::string_view name) {
  return one_of(name,
                {"trim", "tojson",     "length",     "count", "upper",      "lower", "default",
                 "d",    "first",      "last",       "join",  "capitalize", "title", "replace",
                 "list", "string",     "int",        "float", "items",      "safe",  "reverse",
                 "abs",  "selectattr", "rejectattr", "map",   "select",     "reject"});
}

bool is_supported_test(std::string_view name) {
  return one_of(name, {"defined", "undefined", "none", "string", "number", "integer", "float",
                       "boolean", "mapping", "iterable", "sequence", "true", "false", "odd",
                       "even", "divisibleby", "equalto", "eq", "==", "ne", "!=", "sameas",
                       "lower", "upper", "in"});
}

bool is_supported_function(std::string_view name) {
  return one_of(name, {"raise_exception", "namespace", "range", "strftime_now"});
}

bool is_supported_method(std::string_view name) {
  return one_of(name, {"strip", "lstrip", "rstrip", "startswith", "endswith", "split", "upper",
                       "lower", "replace", "title", "capitalize", "get", "items", "keys",
                       "values"});
}

template_program parse_template(std::string_view source) {
  return parser{tokenize_template(source)}.run();
}

}  // namespace conveyor::chat
