// The limits of one rendering and what it has spent.
#include "chat/render_budget.hpp"

#include <algorithm>

#include "chat/template_ast.hpp"
#include "chat/template_lexer.hpp"

namespace conveyor::chat {

std::size_t saturating_product(std::size_t a, std::size_t b) {
  return b != 0 && a > SIZE_MAX / b ? SIZE_MAX : a * b;
}

void render_budget::charge(std::size_t units, int line) {
  work_ = units > SIZE_MAX - work_ ? SIZE_MAX : work_ + units;
  if (work_ > limits_.max_work)
    fail_at_line(line, "the template does more than " + std::to_string(limits_.max_work) +
                           " units of work (bytes and items built, searched or walked): a loop "
                           "or a repetition too large");
}

void render_budget::count_iterations(int64_t n, int line) {
  if (n > limits_.max_loop_iterations - iterations_)
    fail_at_line(line, "the template runs more than " +
                           std::to_string(limits_.max_loop_iterations) + " loop iterations");
  iterations_ += n;
}

void render_budget::too_large(int line) const {
  fail_at_line(line, "the template builds a value that exceeds " +
                         std::to_string(limits_.max_output_bytes) + " bytes");
}

void render_budget::will_weigh(std::size_t weight, int line) const {
  if (weight > limits_.max_output_bytes) too_large(line);
}

value render_budget::built(value v, int line) {
  if (v.weight() > limits_.max_output_bytes) too_large(line);
  if (v.depth() > static_cast<uint32_t>(max_template_nesting))
    fail_at_line(line, "the template builds lists or maps nested more than " +
                           std::to_string(max_template_nesting) + " deep");
  if (v.is_string())
    charge(v.as_string().size(), line);
  else if (v.is_list())
    charge(saturating_product(v.as_list().size(), value::item_weight), line);
  else if (v.is_map())
    charge(saturating_product(v.as_map().size(), value::item_weight), line);
  return v;
}

void render_budget::append_text(std::string& out, std::string_view piece, int line) const {
  if (piece.size() > limits_.max_output_bytes - std::min(out.size(), limits_.max_output_bytes))
    too_large(line);
  out += piece;
}

void render_budget::append(std::string& out, const value& v, int line) const {
  if (!v.append_str(out, limits_.max_output_bytes)) too_large(line);
}

std::string render_budget::text(const value& v, int line) {
  if (v.is_string()) return v.as_string();
  std::string out;
  append(out, v, line);
  charge(out.size(), line);
  return out;
}

}  // namespace conveyor::chat
