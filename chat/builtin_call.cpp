// The arguments of a builtin's call.
#include "chat/builtin_call.hpp"

#include "chat/template_lexer.hpp"

namespace conveyor::chat {

value builtin_call::argument(std::size_t position, const char* name, value dflt) const {
  if (position < e.args.size()) return evaluator.eval(*e.args[position]);
  for (const auto& [k, v] : e.kwargs)
    if (k == name) return evaluator.eval(*v);
  return dflt;
}

std::string builtin_call::string_argument(std::size_t position, const char* name,
                                          const char* what) const {
  auto v = argument(position, name);
  if (!v.is_string())
    fail_at_line(e.line, std::string{what} + " takes a string, got a " + v.type_name());
  return v.as_string();
}

}  // namespace conveyor::chat
