// Chat templates: a model's Jinja chat template (chat_template.jinja or tokenizer_config.json's
// field, or `model.chat_template`) parsed once at start and rendered per request into a prompt,
// within limits that no template can pass.
#pragma once

#include <cstddef>
#include <cstdint>
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

/// What one rendering may do. A template that would pass a limit fails that rendering with
/// ec::bad_request naming the limit and the template line, so that no template can hang the
/// server or exhaust its memory. The defaults leave every real chat template far inside.
struct render_limits {
  /// `for` loop iterations of one rendering, all loops together (items a loop's `if` filter
  /// looks at count too).
  int64_t max_loop_iterations = 1'000'000;
  /// Bytes of the rendered prompt; also the most any one value built while rendering may weigh
  /// (a string's bytes; value::item_weight per item of a list or map, plus the items').
  std::size_t max_output_bytes = std::size_t{16} << 20;
  /// Work of one rendering: one unit per byte of a string that is built or searched, per byte
  /// compared, per item of a list or map walked (8) or built (value::item_weight).
  std::size_t max_work = std::size_t{256} << 20;
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
  /// Parses `source`. An unsupported construct, a syntax error or nesting deeper than
  /// `max_template_nesting` gives ec::bad_config with the construct and its line: "chat
  /// template line 3: unsupported tag 'macro'".
  static expected<chat_template> parse(std::string_view source, special_tokens tokens,
                                       render_limits limits = {});

  /// Renders `messages` as transformers' apply_chat_template does (variables `messages`,
  /// `add_generation_prompt`, `bos_token`, `eos_token`, and `tools` and `documents` as none)
  /// into the prompt text, special tokens written out as text ("<s>[INST] ..."). The text is
  /// tokenized as it is, adding no special tokens: a template writes BOS itself when its model
  /// wants one. A `raise_exception` call gives ec::bad_request "the chat template refused the
  /// conversation: MESSAGE"; other render failures, a passed limit included, give
  /// ec::bad_request "rendering the chat template failed: chat template line N: ...".
  expected<std::string> render(const std::vector<chat_message>& messages,
                               bool add_generation_prompt) const;

  const special_tokens& tokens() const { return tokens_; }
  const render_limits& limits() const { return limits_; }

 private:
  chat_template() = default;

  std::shared_ptr<const template_program> program_;
  special_tokens tokens_;
  render_limits limits_;
};

}  // namespace conveyor::chat
