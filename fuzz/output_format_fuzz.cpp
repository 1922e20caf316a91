// Fuzz target: output formats from arbitrary bytes, compiled by xgrammar against stories260K's
// vocabulary as a request's format is, then followed for a few tokens. The first byte picks the
// kind (JSON schema, regex, EBNF grammar, choice list split at newlines); the rest is its
// source. Every format compiles or is refused with ec::bad_request naming its field, and a
// compiled one gives masks whose allowed tokens it accepts: nothing a client sends crashes the
// engine or reaches undefined behaviour.
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "grammar/grammar_compiler.hpp"
#include "grammar/token_matcher.hpp"

namespace {

const conveyor::grammar::grammar_compiler& compiler() {
  static const auto tokenizer = [] {
    auto t = conveyor::tokenizers::load_tokenizer(std::string{CONVEYOR_SOURCE_DIR} +
                                                  "/models/stories260K/tok512.model");
    if (!t) std::abort();
    return *t;
  }();
  static const conveyor::grammar::grammar_compiler c{*tokenizer, tokenizer->vocab_size()};
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  using kind = sampling::structured_output::kind;
  if (size == 0) return 0;
  sampling::structured_output format;
  format.field = "structured_outputs";
  const std::string source{reinterpret_cast<const char*>(data) + 1, size - 1};
  switch (data[0] % 4) {
    case 0:
      format.type = kind::json_schema;
      format.text = source;
      break;
    case 1:
      format.type = kind::regex;
      format.text = source;
      break;
    case 2:
      format.type = kind::grammar;
      format.text = source;
      break;
    default: {
      format.type = kind::choice;
      std::size_t start = 0;
      for (std::size_t i = 0; i <= source.size(); ++i)
        if (i == source.size() || source[i] == '\n') {
          format.choices.push_back(source.substr(start, i - start));
          start = i + 1;
        }
    }
  }
  auto compiled = compiler().compile(format);
  if (!compiled) {
    if (code_of(compiled.error()) != ec::bad_request ||
        message_of(compiled.error()).rfind("'structured_outputs': ", 0) != 0)
      std::abort();
    return 0;
  }
  // End ids 1 and 2 (BOS and EOS, stories260K's ends); each step takes the lowest allowed id.
  grammar::token_matcher matcher{*compiled, {1, 2}};
  for (int step = 0; step < 16; ++step) {
    if (!matcher.update_mask()) std::abort();
    if (matcher.finished()) break;
    int32_t pick = -1;
    for (int32_t id = 3; id < 512 && pick < 0; ++id)
      if (matcher.allows(id)) pick = id;
    if (pick < 0) break;
    if (!matcher.accept(pick)) std::abort();
  }
  return 0;
}
