// Fuzz target: chat templates from arbitrary bytes, parsed and rendered over a few
// conversations within small limits. Every template renders within the limits or fails with
// ec::bad_config (parsing) or ec::bad_request (rendering) and a message: nothing crashes, hangs
// (the limits bound the work of one rendering) or reaches undefined behaviour.
#include <cstdlib>
#include <string_view>
#include <vector>

#include "chat/chat_template.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  using namespace conveyor::chat;
  render_limits limits;
  limits.max_loop_iterations = 20000;
  limits.max_output_bytes = 64 << 10;
  limits.max_work = 8 << 20;
  std::string_view source{reinterpret_cast<const char*>(data), size};
  auto tmpl = chat_template::parse(source, {"<s>", "</s>"}, limits);
  if (!tmpl) {
    if (code_of(tmpl.error()) != ec::bad_config || message_of(tmpl.error()).empty()) std::abort();
    return 0;
  }
  static const std::vector<std::vector<chat_message>> conversations{
      {{"user", "Hello!"}},
      {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", " Hello. "}, {"user", "ünï ✓\n"}},
  };
  for (const auto& messages : conversations)
    for (bool generation_prompt : {false, true}) {
      auto out = tmpl->render(messages, generation_prompt);
      if (out) {
        if (out->size() > limits.max_output_bytes) std::abort();
      } else if (code_of(out.error()) != ec::bad_request || message_of(out.error()).empty()) {
        std::abort();
      }
    }
  return 0;
}
