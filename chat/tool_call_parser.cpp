// The readers' factory, gathering a whole answer, and the arguments' one JSON form.
#include "chat/tool_call_parser.hpp"

#include <nlohmann/json.hpp>

#include "chat/hermes_tool_parser.hpp"
#include "chat/json_value.hpp"
#include "chat/llama3_json_tool_parser.hpp"

namespace conveyor::chat {

std::unique_ptr<tool_call_parser> make_tool_call_parser(std::string_view family) {
  if (family == "hermes") return std::make_unique<hermes_tool_parser>();
  if (family == "llama3_json") return std::make_unique<llama3_json_tool_parser>();
  return nullptr;
}

void parsed_tool_output::add(const std::vector<tool_call_event>& events) {
  for (const auto& e : events) {
    if (e.type == tool_call_event::kind::content) {
      content += e.text;
      continue;
    }
    if (e.index >= calls.size()) calls.resize(e.index + 1);
    if (!e.name.empty()) calls[e.index].name = e.name;
    calls[e.index].arguments += e.text;
  }
}

std::string python_json(std::string_view json_text) {
  const auto j = nlohmann::ordered_json::parse(json_text, nullptr, false);
  return j.is_discarded() ? std::string{} : python_json(j);
}

}  // namespace conveyor::chat
