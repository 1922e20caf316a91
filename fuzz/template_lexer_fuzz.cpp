// Fuzz target: the chat template lexer on arbitrary bytes. Every input gives tokens that end
// with the end token (text tokens never empty, lines never going back), or a template_error that
// names a line.
#include <cstdlib>
#include <string_view>

#include "chat/template_lexer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor::chat;
  std::string_view source{reinterpret_cast<const char*>(data), size};
  try {
    auto tokens = tokenize_template(source);
    if (tokens.empty() || tokens.back().type != template_token::kind::end) std::abort();
    int line = 1;
    for (const auto& t : tokens) {
      if (t.type == template_token::kind::text && t.text.empty()) std::abort();
      if (t.line < line) std::abort();
      line = t.line;
    }
  } catch (const template_error& e) {
    if (std::string_view{e.what()}.rfind("chat template line ", 0) != 0 || e.line < 1) std::abort();
  }
  return 0;
}
