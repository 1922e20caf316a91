// Where a served model's chat template comes from: `model.chat_template` (inline text or a
// file), else the model's own tokenizer_config.json template, else the default template.
#pragma once

#include <string>

#include "chat/chat_template.hpp"
#include "common/error.hpp"

namespace conveyor::chat {

/// Whether a `model.chat_template` value is template text (it contains "{{" or "{%") rather
/// than a file path.
bool is_inline_template(const std::string& setting);

/// Picks and parses the chat template: `setting` (the `model.chat_template` value: inline text,
/// or a file to read) when not empty, else `model_template` (the chat_template of the model's
/// tokenizer_config.json) when not empty, else `default_chat_template()`. Errors (ec::bad_config
/// for a template outside the supported subset, ec::bad_file for an unreadable file) name the
/// origin: "model.chat_template (chat.jinja): chat template line 3: unsupported tag 'macro'".
expected<chat_template> select_chat_template(const std::string& setting,
                                             const std::string& model_template,
                                             special_tokens tokens);

}  // namespace conveyor::chat
