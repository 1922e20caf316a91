#include "chat/template_source.hpp"

#include <fstream>
#include <sstream>

namespace conveyor::chat {

bool is_inline_template(const std::string& setting) {
  return setting.find("{{") != std::string::npos || setting.find("{%") != std::string::npos;
}

expected<chat_template> select_chat_template(const std::string& setting,
                                             const std::string& model_template,
                                             special_tokens tokens) {
  std::string source;
  std::string origin;
  if (!setting.empty() && is_inline_template(setting)) {
    source = setting;
    origin = "model.chat_template";
  } else if (!setting.empty()) {
    std::ifstream in{setting, std::ios::binary};
    if (!in)
      return make_error(ec::bad_file, "model.chat_template: cannot read the template file '" +
                                          setting + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    source = ss.str();
    origin = "model.chat_template (" + setting + ")";
  } else if (!model_template.empty()) {
    source = model_template;
    origin = "the model's tokenizer_config.json chat_template";
  } else {
    source = std::string{default_chat_template()};
    origin = "the default chat template";
  }
  auto parsed = chat_template::parse(source, std::move(tokens));
  if (!parsed) return make_error(code_of(parsed.error()), origin + ": " + message_of(parsed.error()));
  return parsed;
}

}  // namespace conveyor::chat
