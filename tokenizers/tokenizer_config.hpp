// tokenizer_config.json (Hugging Face transformers): the special tokens, whether BOS/EOS are
// added, and the chat templates, with chat_template.jinja and additional_chat_templates/ beside
// it. Torch-free.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"

namespace conveyor::tokenizers {

/// What Conveyor reads of a tokenizer_config.json. Keys that are absent keep the defaults below;
/// unknown keys are ignored (the file holds many that only Python uses).
struct tokenizer_config {
  /// "bos_token": the text of the beginning-of-sequence token (a string, or {"content": ...}).
  /// Empty when absent or null.
  std::string bos_token;
  /// "eos_token": the text of the end-of-sequence token, as bos_token.
  std::string eos_token;
  /// "unk_token", "pad_token": as bos_token (informational).
  std::string unk_token;
  std::string pad_token;
  /// "add_bos_token" / "add_eos_token": whether encoding adds them; nullopt when absent (the
  /// tokenizer.json's post_processor decides then).
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  /// "chat_template": (name, Jinja template) pairs: a string is named "default"; a list of
  /// {"name", "template"} objects gives its entries in order. Empty when absent.
  std::vector<std::pair<std::string, std::string>> chat_templates;
  /// "model_max_length" when present and a sane integer (transformers writes 1e30 for "none").
  std::optional<long long> model_max_length;
};

/// Reads `path` (a tokenizer_config.json). Errors name the file and the key: ec::bad_file for a
/// missing or unparsable file, ec::bad_config for a key of the wrong type.
expected<tokenizer_config> read_tokenizer_config(const std::string& path);

/// Parses the text of a tokenizer_config.json; `origin` names it in errors.
expected<tokenizer_config> parse_tokenizer_config(const std::string& text,
                                                  const std::string& origin);

/// The tokenizer_config.json beside a tokenizer file (in its folder; a folder given as
/// `tokenizer_path` is looked into): nullopt when there is none, an error naming the file and key
/// when it cannot be read. A GGUF file (`.gguf`) holds its own: read_gguf_tokenizer_config().
expected<std::optional<tokenizer_config>> tokenizer_config_beside(const std::string& tokenizer_path);

/// A model's chat templates, from the tokenizer's folder.
struct model_chat_templates {
  /// (name, Jinja template) pairs; "default" is the one for conversations without tools.
  std::vector<std::pair<std::string, std::string>> templates;
  /// What they were read from, for messages; empty when there are none.
  std::string origin;
};

/// The chat templates beside a tokenizer file (a folder given as `tokenizer_path` is looked
/// into), where transformers' from_pretrained finds them: chat_template.jinja (named "default")
/// and additional_chat_templates/NAME.jinja (named NAME, in name order), which take priority over
/// tokenizer_config.json's "chat_template" field. None when there are none; an error naming the
/// file when one cannot be read. A GGUF file (`.gguf`) holds its own: tokenizer.chat_template
/// ("default") and tokenizer.chat_template.NAME.
expected<model_chat_templates> chat_templates_beside(const std::string& tokenizer_path);

}  // namespace conveyor::tokenizers
