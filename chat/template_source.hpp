// Where a served model's chat template comes from: `model.chat_template` (inline text or a
// file), else the model's own template (as transformers finds it beside the tokenizer). A model
// with neither gets chat refused, saying so; Conveyor never guesses a template.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/chat_template.hpp"
#include "common/error.hpp"

namespace conveyor::chat {

/// The refusal of chat when nothing says more about why the model has no template.
inline constexpr std::string_view no_chat_template_refusal =
    "this model has no chat template: set model.chat_template to one (Jinja text or a file) to "
    "serve chat completions";

/// A model's template and its name: "default" for the one that serves conversations without
/// tools (chat_template.jinja, a string field), else the name it was given ("tool_use", ...).
using named_template = std::pair<std::string, std::string>;

/// The template chat is served with, or why there is none.
struct chat_template_choice {
  /// The template; null when chat is refused.
  std::shared_ptr<const chat_template> tmpl;
  /// The template of conversations with tools: the model's template named "tool_use" where it
  /// has one (apply_chat_template picks it when given tools) and model.chat_template is not set;
  /// null otherwise (`tmpl` serves them).
  std::shared_ptr<const chat_template> tool_tmpl;
  /// Where the template came from, for the log: "model.chat_template (chat.jinja)",
  /// "models/x/chat_template.jinja".
  std::string origin;
  /// When `tmpl` is null: why chat is refused, the message of its 400, which names
  /// `model.chat_template` as the remedy.
  std::string refusal;
};

/// Whether a `model.chat_template` value is template text (it contains "{{" or "{%") rather
/// than a file path.
bool is_inline_template(const std::string& setting);

/// Picks and parses the chat template: `setting` (the `model.chat_template` value: inline text,
/// or a file to read) when not empty; else the model's template named "default" among
/// `model_templates` (read from `model_origin`), as transformers' apply_chat_template picks it
/// for a conversation without tools, and the one named "tool_use" for conversations with tools;
/// else none, with the refusal saying why (no template, or templates of other names only, e.g.
/// "tool_use", which then serves conversations with tools alone). Errors (ec::bad_config for a
/// template outside the supported subset, ec::bad_file for an unreadable file) name the origin:
/// "model.chat_template (chat.jinja): chat template line 3: unsupported tag 'call'".
expected<chat_template_choice> select_chat_template(
    const std::string& setting, const std::vector<named_template>& model_templates,
    const std::string& model_origin, special_tokens tokens, render_limits limits = {});

}  // namespace conveyor::chat
