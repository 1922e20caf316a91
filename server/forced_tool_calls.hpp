// Internal: reading the answers that tool_choice forces into calls (a named function, or
// "required"), whose form the output's JSON schema constraint fixes (server/tool_schema.hpp),
// and the reader each way of reading an answer uses.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_parser.hpp"
#include "server/openai.hpp"

namespace conveyor::server::detail {

/// tool_choice naming a function: the whole output is its arguments, reported piece by piece
/// as it comes (the first piece names the function). An empty output reports nothing.
class named_call_reader final : public chat::tool_call_parser {
 public:
  explicit named_call_reader(std::string function) : function_(std::move(function)) {}

  void feed(std::string_view text, std::vector<chat::tool_call_event>& events) override;
  void finish(std::vector<chat::tool_call_event>& events) override;

 private:
  std::string function_;
  bool started_ = false;
};

/// tool_choice "required": the output is `[{"name": ..., "parameters": {...}}, ...]`. Each
/// element is a call once its name is read and its parameters begin; the parameters' text is
/// its arguments, exactly as written, reported piece by piece as it comes (an object or array
/// as its bytes arrive, another value once whole). An output in which no call could be read
/// (the constraint did not hold) is content, reported at its end.
class required_calls_reader final : public chat::tool_call_parser {
 public:
  void feed(std::string_view text, std::vector<chat::tool_call_event>& events) override;
  void finish(std::vector<chat::tool_call_event>& events) override;

 private:
  // The element being read: where its parameters lie in text_, and what was reported.
  struct element {
    std::string key;
    bool expect_value = false;
    std::string name;
    bool named = false;
    std::size_t value_start = 0;
    bool in_scalar = false;
    // The parameters: where they start, whether they are an object or array, where they end.
    bool has_parameters = false;
    std::size_t parameters_start = 0;
    bool parameters_container = false;
    bool parameters_done = false;
    std::size_t parameters_end = 0;
    std::size_t key_start = 0;
    // Reported: the call's first event, and the arguments' bytes up to here.
    bool reported = false;
    std::size_t reported_to = 0;
  };

  void scan(std::vector<chat::tool_call_event>& events);
  void end_scalar(std::size_t end);
  void report(bool element_ended, std::vector<chat::tool_call_event>& events);

  std::string text_;
  std::size_t scanned_ = 0;
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
  std::size_t string_start_ = 0;
  bool in_element_ = false;
  element element_;
  std::size_t calls_ = 0;
};

/// The reader of an answer read as `reading` says; null for plain text.
std::unique_ptr<chat::tool_call_parser> make_tool_call_reader(const tool_call_reading& reading);

}  // namespace conveyor::server::detail
