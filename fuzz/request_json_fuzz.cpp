// Fuzz target: the validation of completion and chat completion bodies. Arbitrary bytes give a
// request whose fields are within their limits, or a refusal with a message.
#include <cmath>
#include <cstdlib>

#include "chat/chat_template.hpp"
#include "fuzz/fuzz_support.hpp"
#include "server/openai.hpp"

namespace {

conveyor::chat::chat_template load_template() {
  std::FILE* f = std::fopen(conveyor::fuzz::source_path("tests/fixtures/chat_templates/llama3.jinja").c_str(), "rb");
  if (f == nullptr) std::abort();
  std::string source;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) source.append(buf, n);
  std::fclose(f);
  auto tmpl = conveyor::chat::chat_template::parse(source, {"<s>", "</s>"});
  if (!tmpl) std::abort();
  return *tmpl;
}

void check(const std::variant<conveyor::server::completion_body, conveyor::server::body_error>& r) {
  if (auto* err = std::get_if<conveyor::server::body_error>(&r)) {
    if (err->message.empty()) std::abort();
    return;
  }
  const auto& body = std::get<conveyor::server::completion_body>(r);
  for (const auto& req : body.requests) {
    const auto& params = req.params;
    // max_tokens 0 only with echo: the prompt alone is scored.
    if ((params.max_tokens < 1 && !(params.max_tokens == 0 && params.echo)) ||
        !(params.temperature >= 0 && params.temperature <= 2) ||
        !(params.top_p > 0 && params.top_p <= 1) || params.top_k < 0 ||
        (req.timeout_s && !(*req.timeout_s > 0 && std::isfinite(*req.timeout_s))))
      std::abort();
    for (const auto& stop : params.stop)
      if (stop.empty()) std::abort();
    // Accepted sampling fields are within their ranges and token ids within the vocabulary.
    if (!(params.presence_penalty >= -2 && params.presence_penalty <= 2) ||
        !(params.frequency_penalty >= -2 && params.frequency_penalty <= 2) ||
        !(params.repetition_penalty > 0 && params.repetition_penalty <= 2) ||
        params.min_tokens < 0 || params.min_tokens > params.max_tokens)
      std::abort();
    for (const auto& b : params.logit_bias)
      if (b.id < 0 || b.id >= 512 || !(b.bias >= -100 && b.bias <= 100)) std::abort();
    for (auto id : params.stop_token_ids)
      if (id < 0 || id >= 512) std::abort();
    for (auto id : req.prompt_tokens)
      if (id < 0 || id >= 512) std::abort();
    conveyor::fuzz::require_utf8(req.prompt, "an accepted prompt");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor::server;
  static const auto tmpl = load_template();
  std::string_view body{reinterpret_cast<const char*>(data), size};
  completion_defaults defaults;
  defaults.vocab_size = 512;
  check(parse_completion_body(body, defaults, 8));
  check(parse_chat_body(body, defaults, tmpl));
  return 0;
}
