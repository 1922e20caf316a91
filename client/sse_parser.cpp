// Server-sent events: lines, fields and events as the HTML standard's event-stream parsing has
// them (data lines only).
#include "client/sse_parser.hpp"

namespace conveyor::client {

void sse_parser::feed(std::string_view bytes) {
  for (char c : bytes) {
    if (c == '\n' && last_was_cr_) {  // the LF of a CRLF
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      line(pending_);
      pending_.clear();
    } else {
      pending_ += c;
    }
  }
}

void sse_parser::line(std::string_view text) {
  if (text.empty()) {  // the end of an event
    if (has_data_) on_event_(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  if (text.front() == ':') return;  // a comment
  auto colon = text.find(':');
  auto field = text.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = text.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field != "data") return;
  if (has_data_) data_ += '\n';
  data_.append(value.data(), value.size());
  has_data_ = true;
}

}  // namespace conveyor::client
