// Fuzz target: the chat template parser on arbitrary bytes. Every input gives a syntax tree no
// deeper than max_template_nesting, or a template_error that names a line; deep nesting is
// refused, never a stack overflow.
#include <cstdlib>
#include <string_view>

#include "chat/template_parser.hpp"

namespace {

using namespace conveyor::chat;

// The height of `e`, checked against the height the parser recorded.
int height(const expr& e) {
  int h = 0;
  for (const auto& a : e.args)
    if (a) h = std::max(h, height(*a));
  for (const auto& kv : e.kwargs) h = std::max(h, height(*kv.second));
  if (h + 1 != e.depth || e.depth > max_template_nesting) std::abort();
  return h + 1;
}

// Blocks nest no deeper than max_template_nesting either.
void check(const node_list& body, int level) {
  if (level > max_template_nesting) std::abort();
  for (const auto& n : body) {
    for (const auto* e : {n->value.get(), n->condition.get()})
      if (e) height(*e);
    for (const auto& c : n->conditions) height(*c);
    for (const auto& b : n->bodies) check(b, level + 1);
    check(n->body, level + 1);
    check(n->else_body, level + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view source{reinterpret_cast<const char*>(data), size};
  try {
    check(parse_template(source).body, 0);
  } catch (const template_error& e) {
    if (std::string_view{e.what()}.rfind("chat template line ", 0) != 0 || e.line < 1) std::abort();
  }
  return 0;
}
