// Chat templates: a model's Jinja chat template (chat_template.jinja or tokenizer_config.json's
// field, or `model.chat_template`) parsed once at start and rendered per request into a prompt,
// within limits that no template can pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/value.hpp"
#include "common/error.hpp"

namespace conveyor::chat {

struct template_program;

/// A call of a function that an assistant message made (OpenAI's `tool_calls` entry).
struct chat_tool_call {
  /// The call's id, which the tool message that answers it names.
  std::string id;
  /// The function's name.
  std::string name;
  /// The arguments as a mapping: the API's JSON string parsed, as vLLM hands it to templates
  /// (Llama 3.1's and Qwen's write it with `tojson`).
  value arguments;
};

/// One message of a conversation, as transformers hands it to a template: a map with `role`
/// and `content`, plus `tool_calls` (assistant messages that call functions), `tool_call_id`
/// and `name` (tool messages) where the message has them.
struct chat_message {
  /// "system", "user", "assistant" or "tool".
  std::string role;
  /// The text; none for an assistant message that only calls functions (content null).
  std::optional<std::string> content;
  /// The calls of an assistant message; the key is absent when there are none.
  std::vector<chat_tool_call> tool_calls{};
  /// A tool message's answer to the call with this id; the key is absent when empty.
  std::string tool_call_id{};
  /// A tool message's function name; the key is absent when empty.
  std::string name{};
};

/// What a rendering renders besides the messages.
struct render_options {
  /// Open the assistant's turn at the end.
  bool add_generation_prompt = false;
  /// The template variable `tools`: the request's tool list (transformers passes the JSON
  /// schemas as given), or none.
  value tools = value::none();
  /// The local time that `strftime_now` formats (transformers' strftime_now formats
  /// datetime.now()); unset, the clock's local time at the rendering. Set, renderings are
  /// reproducible: the tests give the time that the reference fixtures were made with.
  std::optional<std::tm> now{};
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
  /// template line 3: unsupported tag 'call'".
  static expected<chat_template> parse(std::string_view source, special_tokens tokens,
                                       render_limits limits = {});

  /// Renders `messages` as transformers' apply_chat_template does (variables `messages`,
  /// `add_generation_prompt`, `bos_token`, `eos_token`, `tools`, `documents` as none, and the
  /// function `strftime_now`) into the prompt text, special tokens written out as text ("<s>[INST]
  /// ..."). The text is tokenized as it is, adding no special tokens: a template writes BOS itself
  /// when its model wants one. A `raise_exception` call gives ec::bad_request "the chat template
  /// refused the conversation: MESSAGE"; other render failures, a passed limit included, give
  /// ec::bad_request "rendering the chat template failed: chat template line N: ...".
  expected<std::string> render(const std::vector<chat_message>& messages,
                               const render_options& options) const;

  /// The same without tools, at the clock's time.
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
