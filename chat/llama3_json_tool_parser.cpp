// Llama 3 JSON tool calls.
#include "chat/llama3_json_tool_parser.hpp"

#include <nlohmann/json.hpp>

#include "chat/json_value.hpp"

namespace conveyor::chat {

namespace {

constexpr std::string_view python_tag = "<|python_tag|>";

std::size_t skip_space(const std::string& s, std::size_t i) {
  while (i < s.size() && is_json_space(s[i])) ++i;
  return i;
}

}  // namespace

void llama3_json_tool_parser::feed(std::string_view text, std::vector<tool_call_event>& events) {
  pending_ += text;
  read(false, events);
}

void llama3_json_tool_parser::finish(std::vector<tool_call_event>& events) {
  read(true, events);
  // What is left: an object the output ended inside, or an output of whitespace alone; the
  // whitespace after a last `;` is dropped.
  if (phase_ == phase::in_object || phase_ == phase::start) add_content(pending_, events);
  pending_.clear();
}

void llama3_json_tool_parser::add_content(std::string_view text,
                                          std::vector<tool_call_event>& events) {
  if (text.empty()) return;
  if (!events.empty() && events.back().type == tool_call_event::kind::content)
    events.back().text += text;
  else
    events.push_back({tool_call_event::kind::content, std::string{text}, 0, {}});
}

void llama3_json_tool_parser::read(bool final, std::vector<tool_call_event>& events) {
  while (true) {
    switch (phase_) {
      case phase::content:
        add_content(pending_, events);
        pending_.clear();
        return;
      case phase::start:
      case phase::next_object: {
        const auto i = skip_space(pending_, 0);
        if (i == pending_.size()) return;
        const std::string_view rest = std::string_view{pending_}.substr(i);
        if (phase_ == phase::start && rest.size() < python_tag.size() &&
            python_tag.substr(0, rest.size()) == rest) {
          if (final) {
            phase_ = phase::content;
            continue;
          }
          return;  // may be the tag
        }
        if (phase_ == phase::start && rest.substr(0, python_tag.size()) == python_tag) {
          pending_.erase(0, i + python_tag.size());
          phase_ = phase::next_object;
          continue;
        }
        if (rest[0] != '{') {
          // Not a call: content from here (the whitespace after a `;` dropped).
          if (phase_ == phase::next_object) pending_.erase(0, i);
          phase_ = phase::content;
          continue;
        }
        pending_.erase(0, i);
        phase_ = phase::in_object;
        scanned_ = 0;
        depth_ = 0;
        in_string_ = false;
        escaped_ = false;
        continue;
      }
      case phase::in_object: {
        std::size_t end = 0;
        for (; scanned_ < pending_.size() && end == 0; ++scanned_) {
          const char c = pending_[scanned_];
          if (in_string_) {
            if (escaped_)
              escaped_ = false;
            else if (c == '\\')
              escaped_ = true;
            else if (c == '"')
              in_string_ = false;
          } else if (c == '"') {
            in_string_ = true;
          } else if (c == '{' || c == '[') {
            ++depth_;
          } else if ((c == '}' || c == ']') && --depth_ == 0) {
            end = scanned_ + 1;
          }
        }
        if (end == 0) return;  // held until it closes (finish makes it content)
        const auto call = nlohmann::ordered_json::parse(pending_.substr(0, end), nullptr, false);
        std::string name, arguments = "{}";
        bool ok = call.is_object();
        if (ok) {
          const auto n = call.find("name");
          ok = n != call.end() && n->is_string() && !n->get_ref<const std::string&>().empty();
          if (ok) name = n->get<std::string>();
          auto a = call.find("parameters");
          if (a == call.end()) a = call.find("arguments");
          if (ok && a != call.end()) {
            ok = a->is_object();
            if (ok) arguments = python_json(*a);
            ok = ok && !arguments.empty();
          }
        }
        if (!ok) {
          phase_ = phase::content;
          continue;
        }
        events.push_back({tool_call_event::kind::call, std::move(arguments), calls_++, name});
        pending_.erase(0, end);
        phase_ = phase::after_object;
        continue;
      }
      case phase::after_object: {
        const auto i = skip_space(pending_, 0);
        if (i == pending_.size()) {
          if (final) pending_.clear();  // whitespace after the last call
          return;
        }
        if (pending_[i] == ';') {
          pending_.erase(0, i + 1);
          phase_ = phase::next_object;
          continue;
        }
        pending_.erase(0, i);
        phase_ = phase::content;
        continue;
      }
    }
  }
}

}  // namespace conveyor::chat
