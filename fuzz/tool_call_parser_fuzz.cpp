// Fuzz target: a model's output from arbitrary bytes, read by a tool-call parser (the first byte
// picks hermes or llama3_json and where the text is cut into pieces). The answer gathered from
// the pieces equals the answer of the whole text read at once, as streamed and whole answers
// must, and every call's arguments are JSON: nothing crashes or reaches undefined behaviour.
#include <cstdlib>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_call_parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor::chat;
  if (size == 0) return 0;
  const char* family = (data[0] & 1) ? "hermes" : "llama3_json";
  const std::size_t piece = 1 + (data[0] >> 1) % 13;
  const std::string_view text{reinterpret_cast<const char*>(data) + 1, size - 1};
  auto whole_parser = make_tool_call_parser(family);
  auto piece_parser = make_tool_call_parser(family);
  if (!whole_parser || !piece_parser) std::abort();
  std::vector<tool_call_event> whole_events, piece_events;
  whole_parser->feed(text, whole_events);
  whole_parser->finish(whole_events);
  for (std::size_t at = 0; at < text.size(); at += piece)
    piece_parser->feed(text.substr(at, piece), piece_events);
  piece_parser->finish(piece_events);
  parsed_tool_output whole, pieces;
  whole.add(whole_events);
  pieces.add(piece_events);
  if (whole.content != pieces.content || whole.calls.size() != pieces.calls.size()) std::abort();
  for (std::size_t i = 0; i < whole.calls.size(); ++i) {
    if (whole.calls[i].name != pieces.calls[i].name ||
        whole.calls[i].arguments != pieces.calls[i].arguments)
      std::abort();
    if (!nlohmann::json::accept(whole.calls[i].arguments)) std::abort();
  }
  return 0;
}
