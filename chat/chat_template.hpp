// Chat templates: a model's Jinja chat template (chat_template.jinja or tokenizer_config.json's
// field, or `model.chat_template`) parsed once at start and rendered per request into a prompt.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace conveyor::chat {

struct template_program;

/// One message of a conversation.
struct chat_message {
  /// "system", "user" or "assistant".
  std::string role;
  /// The text.
  std::string content;
};

/// The special-token strings a template sees as `bos_token` and `eos_token`.
struct special_tokens {
  std::string bos_token;
  std::string eos_token;
};

/// A parsed chat template with the special tokens it renders with. Immutable and cheap to copy;
/// one instance may be shared by many threads.
class chat_template {
 public:
  /// Parses `source`. An unsupported construct or a syntax error gives ec::bad_config with the
  /// construct and its line: "chat template line 3: unsupported tag 'macro'".
  static expected<chat_template> parse(std::string_view source, special_tokens tokens);

  /// Renders `messages` as transformers' apply_chat_template does (variables `messages`,
  /// `add_generation_prompt`, `bos_token`, `eos_token`, and `tools` and `documents` as none)
  /// into the prompt text, special tokens written out as text ("<s>[INST] ..."). The text is
  /// tokenized as it is, adding no special tokens: a template writes BOS itself when its model
  /// wants one. A `raise_exception` call gives ec::bad_request "the chat template refused the
  /// conversation: MESSAGE"; other render failures give ec::bad_request "rendering the chat
  /// template failed: chat template line N: ...".
  expected<std::string> render(const std::vector<chat_message>& messages,
                               bool add_generation_prompt) const;

  const special_tokens& tokens() const { return tokens_; }

 private:
  chat_template() = default;

  std::shared_ptr<const template_program> program_;
  special_tokens tokens_;
};

}  // namespace conveyor::chat
