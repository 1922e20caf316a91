// The tool calls of Llama 3 models in JSON form: `{"name": ..., "parameters": {...}}`, after an
// optional `<|python_tag|>`, several separated by `;` (vLLM's `llama3_json` parser).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_parser.hpp"

namespace conveyor::chat {

/// Reads an output that begins (after whitespace and an optional `<|python_tag|>`) with `{`
/// as calls: each JSON object with a string `name` and an object `parameters` (or `arguments`;
/// absent is {}) is a call, its arguments in python_json's form, and `;` separates them. The
/// first object that is not a call, and any text after the calls other than `;` and
/// whitespace, stay content from there on (an object the output ends inside too). An output
/// that begins otherwise is all content. An object is held back until it closes.
class llama3_json_tool_parser final : public tool_call_parser {
 public:
  void feed(std::string_view text, std::vector<tool_call_event>& events) override;
  void finish(std::vector<tool_call_event>& events) override;

 private:
  enum class phase : uint8_t {
    start,         // nothing but whitespace yet
    next_object,   // after `<|python_tag|>` or `;`: an object may follow
    in_object,     // inside an object that starts at pending_[0]
    after_object,  // after a call: `;`, whitespace, or content
    content,       // everything from here is content
  };

  void read(bool final, std::vector<tool_call_event>& events);
  void add_content(std::string_view text, std::vector<tool_call_event>& events);

  std::string pending_;
  phase phase_ = phase::start;
  // Inside an object: where the scan stopped, and its state there.
  std::size_t scanned_ = 0;
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
  std::size_t calls_ = 0;
};

}  // namespace conveyor::chat
