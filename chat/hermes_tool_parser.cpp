// Hermes and Qwen tool calls.
#include "chat/hermes_tool_parser.hpp"

#include <nlohmann/json.hpp>

#include "chat/json_value.hpp"

namespace conveyor::chat {

namespace {

constexpr std::string_view open_tag = "<tool_call>";
constexpr std::string_view close_tag = "</tool_call>";

// The length of the longest end of `text` that begins `tag` (shorter than the tag).
std::size_t partial_tag(std::string_view text, std::string_view tag) {
  for (std::size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

void hermes_tool_parser::feed(std::string_view text, std::vector<tool_call_event>& events) {
  pending_ += text;
  read(false, events);
}

void hermes_tool_parser::finish(std::vector<tool_call_event>& events) {
  read(true, events);
  held_space_.clear();
}

void hermes_tool_parser::read(bool final, std::vector<tool_call_event>& events) {
  while (true) {
    if (!in_call_) {
      const auto at = pending_.find(open_tag);
      if (at == std::string::npos) {
        const auto keep = final ? 0 : partial_tag(pending_, open_tag);
        add_content(std::string_view{pending_}.substr(0, pending_.size() - keep), events);
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      add_content(std::string_view{pending_}.substr(0, at), events);
      pending_.erase(0, at + open_tag.size());
      in_call_ = true;
      searched_ = 0;
      continue;
    }
    // The block so far was searched up to `searched_` (a tag may straddle that point).
    const auto at =
        pending_.find(close_tag, searched_ > close_tag.size() ? searched_ - close_tag.size() : 0);
    searched_ = pending_.size();
    if (at == std::string::npos) {
      if (!final) return;
      if (!add_call(pending_, events)) add_content(std::string{open_tag} + pending_, events);
      pending_.clear();
      in_call_ = false;
      return;
    }
    const std::string_view body = std::string_view{pending_}.substr(0, at);
    if (!add_call(body, events))
      add_content(std::string{open_tag} + std::string{body} + std::string{close_tag}, events);
    pending_.erase(0, at + close_tag.size());
    in_call_ = false;
  }
}

void hermes_tool_parser::add_content(std::string_view text, std::vector<tool_call_event>& events) {
  if (text.empty()) return;
  // After a call, whitespace is held until text follows it (between calls and at the end it
  // is dropped), whatever pieces it came in.
  std::string_view trailing;
  if (calls_ > 0) {
    std::size_t end = text.size();
    while (end > 0 && is_json_space(text[end - 1])) --end;
    trailing = text.substr(end);
    text = text.substr(0, end);
    if (text.empty()) {
      held_space_ += trailing;
      return;
    }
  }
  tool_call_event e;
  e.text = std::move(held_space_);
  e.text += text;
  held_space_ = std::string{trailing};
  if (!events.empty() && events.back().type == tool_call_event::kind::content)
    events.back().text += e.text;
  else
    events.push_back(std::move(e));
}

bool hermes_tool_parser::add_call(std::string_view body, std::vector<tool_call_event>& events) {
  const auto call = nlohmann::ordered_json::parse(body, nullptr, false);
  if (!call.is_object()) return false;
  const auto name = call.find("name");
  if (name == call.end() || !name->is_string() || name->get_ref<const std::string&>().empty())
    return false;
  auto arguments = call.find("arguments");
  if (arguments == call.end()) arguments = call.find("parameters");
  std::string text = "{}";
  if (arguments != call.end()) {
    if (!arguments->is_object()) return false;
    text = python_json(*arguments);
    if (text.empty()) return false;
  }
  held_space_.clear();
  events.push_back(
      {tool_call_event::kind::call, std::move(text), calls_++, name->get<std::string>()});
  return true;
}

}  // namespace conveyor::chat
