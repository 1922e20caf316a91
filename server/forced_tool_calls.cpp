// The answers that tool_choice forces into calls.
#include "server/forced_tool_calls.hpp"

#include <nlohmann/json.hpp>

namespace conveyor::server::detail {

namespace {

using chat::tool_call_event;

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// The string a JSON string literal (quotes included) stands for; empty if it is not one.
std::string unquote(std::string_view literal) {
  auto j = nlohmann::json::parse(literal, nullptr, false);
  return j.is_string() ? j.get<std::string>() : std::string{};
}

}  // namespace

// -- named_call_reader ---------------------------------------------------------------------------

void named_call_reader::feed(std::string_view text, std::vector<tool_call_event>& events) {
  if (text.empty()) return;
  events.push_back(
      {tool_call_event::kind::call, std::string{text}, 0, started_ ? std::string{} : function_});
  started_ = true;
}

void named_call_reader::finish(std::vector<tool_call_event>&) {}

// -- required_calls_reader -----------------------------------------------------------------------

void required_calls_reader::feed(std::string_view text, std::vector<tool_call_event>& events) {
  text_ += text;
  scan(events);
}

void required_calls_reader::finish(std::vector<tool_call_event>& events) {
  if (calls_ == 0 && !(in_element_ && element_.reported))
    events.push_back({tool_call_event::kind::content, text_, 0, {}});
}

void required_calls_reader::end_scalar(std::size_t end) {
  auto& e = element_;
  e.in_scalar = false;
  e.expect_value = false;
  if (e.key == "parameters" && e.has_parameters && !e.parameters_container) {
    e.parameters_done = true;
    e.parameters_end = end;
  }
}

void required_calls_reader::scan(std::vector<tool_call_event>& events) {
  auto& e = element_;
  for (; scanned_ < text_.size(); ++scanned_) {
    const std::size_t i = scanned_;
    const char c = text_[i];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
        if (depth_ == 2 && in_element_) {
          const std::string_view literal{text_.data() + string_start_, i + 1 - string_start_};
          if (!e.expect_value) {
            e.key = unquote(literal);
          } else {
            e.expect_value = false;
            if (e.key == "name") {
              e.name = unquote(literal);
              e.named = !e.name.empty();
            } else if (e.key == "parameters") {
              e.parameters_done = true;
              e.parameters_end = i + 1;
            }
          }
        }
      }
      continue;
    }
    if (depth_ == 2 && in_element_ && e.in_scalar &&
        (is_space(c) || c == ',' || c == '}' || c == ']'))
      end_scalar(i);
    switch (c) {
      case '"':
        in_string_ = true;
        string_start_ = i;
        if (depth_ == 2 && in_element_ && e.expect_value && e.key == "parameters") {
          e.has_parameters = true;
          e.parameters_start = i;
        }
        break;
      case '{':
      case '[':
        if (depth_ == 2 && in_element_ && e.expect_value) {
          e.expect_value = false;
          if (e.key == "parameters") {
            e.has_parameters = true;
            e.parameters_container = true;
            e.parameters_start = i;
          }
        }
        if (depth_ == 1 && c == '{') {
          in_element_ = true;
          e = element{};
        }
        ++depth_;
        break;
      case '}':
      case ']':
        --depth_;
        if (depth_ == 2 && in_element_ && e.key == "parameters" && e.parameters_container &&
            !e.parameters_done) {
          e.parameters_done = true;
          e.parameters_end = i + 1;
        }
        if (depth_ == 1 && c == '}' && in_element_) {
          report(true, events);
          in_element_ = false;
        }
        break;
      case ':':
        if (depth_ == 2 && in_element_) e.expect_value = true;
        break;
      default:
        if (depth_ == 2 && in_element_ && e.expect_value && !e.in_scalar && !is_space(c) &&
            c != ',') {
          e.in_scalar = true;
          if (e.key == "parameters") {
            e.has_parameters = true;
            e.parameters_start = i;
          }
        }
        break;
    }
  }
  if (in_element_) report(false, events);
}

void required_calls_reader::report(bool element_ended, std::vector<tool_call_event>& events) {
  auto& e = element_;
  if (!e.named) return;
  if (e.has_parameters) {
    const std::size_t end = e.parameters_done        ? e.parameters_end
                            : e.parameters_container ? text_.size()
                                                     : e.parameters_start;
    if (!e.reported) {
      events.push_back({tool_call_event::kind::call,
                        text_.substr(e.parameters_start, end - e.parameters_start), calls_,
                        e.name});
      e.reported = true;
      e.reported_to = end;
    } else if (end > e.reported_to) {
      events.push_back({tool_call_event::kind::call,
                        text_.substr(e.reported_to, end - e.reported_to),
                        calls_,
                        {}});
      e.reported_to = end;
    }
  } else if (element_ended && !e.reported) {
    events.push_back({tool_call_event::kind::call, "{}", calls_, e.name});
    e.reported = true;
  }
  if (element_ended && e.reported) ++calls_;
}

// -- the readers ---------------------------------------------------------------------------------

std::unique_ptr<chat::tool_call_parser> make_tool_call_reader(const tool_call_reading& reading) {
  switch (reading.type) {
    case tool_call_reading::mode::none:
      return nullptr;
    case tool_call_reading::mode::named:
      return std::make_unique<named_call_reader>(reading.function);
    case tool_call_reading::mode::required:
      return std::make_unique<required_calls_reader>();
    case tool_call_reading::mode::parsed:
      return chat::make_tool_call_parser(reading.parser);
  }
  return nullptr;
}

}  // namespace conveyor::server::detail
