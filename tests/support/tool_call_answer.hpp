// Helpers shared by the tool-call suites: an answer's content and calls, comparable and
// printable, so that a test states the answer it expects in one line.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace conveyor::test {

/// The content of an answer and its calls (name, arguments), in order.
struct answer {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;

  friend bool operator==(const answer& a, const answer& b) {
    return a.content == b.content && a.calls == b.calls;
  }
};

inline std::ostream& operator<<(std::ostream& os, const answer& a) {
  os << "content=[" << a.content << "]";
  for (const auto& [name, arguments] : a.calls) os << " call " << name << " " << arguments;
  return os;
}

}  // namespace conveyor::test
