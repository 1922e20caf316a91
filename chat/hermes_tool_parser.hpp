// The tool calls of Hermes and Qwen models: `<tool_call>\n{"name": ..., "arguments": {...}}\n
// </tool_call>` blocks, one or several, after optional text (vLLM's `hermes` parser).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_parser.hpp"

namespace conveyor::chat {

/// Reads `<tool_call>` blocks. A block whose JSON is an object with a string `name` (and an
/// object `arguments`, or `parameters`; absent is {}) is a call, its arguments in
/// python_json's form; a block that is not stays content, tags and all, as does text before
/// the first call and text after one that is not only whitespace (whitespace between and after
/// calls is dropped). A block that the output ends inside is a call if its JSON is complete.
/// Text that may begin `<tool_call>` is held back until it can tell.
class hermes_tool_parser final : public tool_call_parser {
 public:
  void feed(std::string_view text, std::vector<tool_call_event>& events) override;
  void finish(std::vector<tool_call_event>& events) override;

 private:
  void read(bool final, std::vector<tool_call_event>& events);
  void add_content(std::string_view text, std::vector<tool_call_event>& events);
  bool add_call(std::string_view body, std::vector<tool_call_event>& events);

  // Text not yet reported.
  std::string pending_;
  // Inside a `<tool_call>` block (its tag consumed), searched for its end up to here.
  bool in_call_ = false;
  std::size_t searched_ = 0;
  // Calls reported so far.
  std::size_t calls_ = 0;
  // Whitespace after a call: dropped unless other text follows.
  std::string held_space_;
};

}  // namespace conveyor::chat
