#include "chat/template_source.hpp"

#include <fstream>
#include <sstream>

namespace conveyor::chat {

namespace {

const char* const remedy =
    ": set model.chat_template to one (Jinja text or a file) to serve chat completions";

}  // namespace

bool is_inline_template(const std::string& setting) {
  return setting.find("{{") != std::string::npos || setting.find("{%") != std::string::npos;
}

expected<chat_template_choice> select_chat_template(
    const std::string& setting, const std::vector<named_template>& model_templates,
    const std::string& model_origin, special_tokens tokens, render_limits limits) {
  chat_template_choice choice;
  std::string source;
  if (setting.empty())
    for (const auto& [name, text] : model_templates) {
      if (name != "tool_use") continue;
      auto parsed = chat_template::parse(text, tokens, limits);
      if (!parsed)
        return make_error(code_of(parsed.error()),
                          model_origin + " (tool_use): " + message_of(parsed.error()));
      choice.tool_tmpl = std::make_shared<const chat_template>(std::move(*parsed));
    }
  if (!setting.empty() && is_inline_template(setting)) {
    source = setting;
    choice.origin = "model.chat_template";
  } else if (!setting.empty()) {
    std::ifstream in{setting, std::ios::binary};
    if (!in)
      return make_error(ec::bad_file, "model.chat_template: cannot read the template file '" +
                                          setting + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    source = ss.str();
    choice.origin = "model.chat_template (" + setting + ")";
  } else {
    std::string names;
    for (const auto& [name, text] : model_templates) {
      if (name == "default") {
        source = text;
        choice.origin = model_origin;
      }
      names += (names.empty() ? "" : ", ") + name;
    }
    if (choice.origin.empty()) {
      choice.refusal =
          model_templates.empty()
              ? "this model has no chat template (no chat_template.jinja, and no "
                "\"chat_template\" in tokenizer_config.json, beside its tokenizer)" +
                    std::string{remedy}
              : "this model's chat templates (" + names + ", in " + model_origin +
                    ") include none named \"default\", for a conversation without tools" + remedy;
      return choice;
    }
  }
  auto parsed = chat_template::parse(source, std::move(tokens), limits);
  if (!parsed)
    return make_error(code_of(parsed.error()), choice.origin + ": " + message_of(parsed.error()));
  choice.tmpl = std::make_shared<const chat_template>(std::move(*parsed));
  return choice;
}

}  // namespace conveyor::chat
