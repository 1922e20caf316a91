// Helpers shared by the test suites: the embedded model's files and its expected output.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string_view>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace conveyor::test {

inline std::string source_path(const std::string& relative) {
  return std::string{CONVEYOR_SOURCE_DIR} + "/" + relative;
}

inline std::string stories_model() {
  return source_path("models/stories260K/stories260K.bin");
}

/// The expected greedy run of llama2.c's run.c: prompt ids and all 65 ids (prompt first).
struct expected_run {
  std::vector<int32_t> prompt;
  std::vector<int32_t> sequence;
  std::string text;
  std::vector<int32_t> generated() const {
    return {sequence.begin() + static_cast<long>(prompt.size()), sequence.end()};
  }
};

inline expected_run load_expected_run() {
  expected_run r;
  std::ifstream in(source_path("models/stories260K/expected/greedy_once_upon_a_time_n64.tokens"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream is(line);
    std::string key;
    is >> key;
    auto& dst = key == "PROMPT_TOKENS" ? r.prompt : r.sequence;
    int32_t id;
    while (is >> id) dst.push_back(id);
  }
  std::ifstream txt(source_path("models/stories260K/expected/greedy_once_upon_a_time_n64.txt"),
                    std::ios::binary);
  r.text.assign(std::istreambuf_iterator<char>(txt), std::istreambuf_iterator<char>());
  return r;
}

/// Renders bytes with escapes, for readable failure messages.
inline std::string escaped(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

}  // namespace conveyor::test
