// Chat templates: the Jinja `chat_template` of a model's tokenizer_config.json (or
// `model.chat_template`) parsed once at start and rendered per request into a prompt.
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

/// A rendered conversation, ready to tokenize.
struct chat_prompt {
  /// The prompt text, special tokens written out as text (e.g. "<s>[INST] ...").
  std::string text;
  /// Whether the tokenizer should add BOS: false when the template writes `bos_token` itself.
  bool add_bos = true;
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
  /// `add_generation_prompt`, `bos_token`, `eos_token`, and `tools` and `documents` as none).
  /// A `raise_exception` call gives ec::bad_request "the chat template refused the
  /// conversation: MESSAGE"; other render failures give ec::bad_request with the line.
  expected<chat_prompt> render(const std::vector<chat_message>& messages,
                               bool add_generation_prompt) const;

  /// Renders with the raw result only (for tests): the text, or the error.
  expected<std::string> render_text(const std::vector<chat_message>& messages,
                                    bool add_generation_prompt) const;

  /// Whether the template refers to `bos_token` (then prompts are tokenized without BOS).
  bool writes_bos() const { return writes_bos_; }

  const special_tokens& tokens() const { return tokens_; }

 private:
  chat_template() = default;

  std::shared_ptr<const template_program> program_;
  special_tokens tokens_;
  bool writes_bos_ = false;
};

/// The template of models that bring none (the embedded stories260K): each message as
/// "Role: content" on its own line, then "Assistant:" when a generation prompt is asked for.
std::string_view default_chat_template();

}  // namespace conveyor::chat
