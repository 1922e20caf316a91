// Server-sent events (text/event-stream) split into events: the one parser of `conveyor bench
// --target` and the tests.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace conveyor::client {

/// Splits a text/event-stream into events and hands each event's data (its `data:` lines joined
/// by newlines) to a callback. Accepts LF, CRLF and CR line ends; ignores comments and other
/// fields. Bytes may arrive in pieces of any size; an event is handed over at the blank line that
/// ends it, so a trailing event without one is not.
class sse_parser {
 public:
  /// Receives the data of one event.
  using event_handler = std::function<void(const std::string& data)>;

  /// Makes a parser that hands each event to `on_event`.
  explicit sse_parser(event_handler on_event) : on_event_(std::move(on_event)) {}

  /// Feeds more bytes of the stream.
  void feed(std::string_view bytes);

 private:
  void line(std::string_view text);

  event_handler on_event_;
  std::string pending_;
  std::string data_;
  bool has_data_ = false;
  bool last_was_cr_ = false;
};

}  // namespace conveyor::client
