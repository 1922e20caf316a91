// Reading tool calls out of a model's output as it is generated: the interface every reader
// implements (a model family's format, `model.tool_call_parser`; the forms that tool_choice
// forces), what it reports, and the one way a whole answer is gathered from its reports, so
// that a streamed answer and a whole one agree however the output was cut into pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::chat {

/// What a reader found in the output, in the order it comes.
struct tool_call_event {
  enum class kind : uint8_t {
    /// Text for the answer's `content`.
    content,
    /// A piece of call `index`: its first event names the function, every event carries a
    /// piece of its arguments (JSON text; the first may be empty).
    call,
  };
  kind type = kind::content;
  /// The content, or the piece of the arguments.
  std::string text;
  /// Which call of the output (0, 1, ...).
  std::size_t index = 0;
  /// The function's name on a call's first event; empty on the others.
  std::string name;
};

/// Reads one output. feed() takes the text as it comes and reports what it can tell now,
/// holding back what might still turn out to be (or end) a call; finish() reports the rest.
/// The reports' concatenation depends only on the whole text, never on how it was cut.
class tool_call_parser {
 public:
  virtual ~tool_call_parser() = default;

  /// Reads the next piece of the output, appending its events to `events`.
  virtual void feed(std::string_view text, std::vector<tool_call_event>& events) = 0;

  /// The output ended: appends the events of what was held back.
  virtual void finish(std::vector<tool_call_event>& events) = 0;
};

/// The parser of a model family's format: "hermes" (Hermes, Qwen: `<tool_call>` JSON blocks)
/// or "llama3_json" (Llama 3: JSON objects separated by `;`); null for any other name.
std::unique_ptr<tool_call_parser> make_tool_call_parser(std::string_view family);

/// One call of a whole answer.
struct parsed_tool_call {
  std::string name;
  std::string arguments;
};

/// A whole answer: the content and the calls.
struct parsed_tool_output {
  std::string content;
  std::vector<parsed_tool_call> calls;

  /// Adds the events (in order) to the answer.
  void add(const std::vector<tool_call_event>& events);
};

/// Python's json.dumps(x, ensure_ascii=False) of the JSON text `json_text` (keys in their
/// order, ", " and ": " separators): the form every call's arguments take. Empty when
/// `json_text` is not JSON.
std::string python_json(std::string_view json_text);

}  // namespace conveyor::chat
