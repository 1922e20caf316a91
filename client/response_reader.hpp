// Reads one HTTP/1.1 response from the bytes of a connection as they arrive, with Beast's
// parser: Content-Length, chunked or close-delimited. The blocking client (http_client.hpp) and
// the asynchronous streams of `conveyor bench --target` both feed it; it does no I/O itself.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "client/http_client.hpp"

namespace conveyor::client {

class response_reader {
 public:
  enum class progress { more, done, failed };

  /// `head_request`: the response to HEAD has no body. With `on_body`, the head and then each
  /// piece of the body go to it as they are parsed, instead of the body into `reply()`.
  explicit response_reader(bool head_request = false, body_handler on_body = {});
  ~response_reader();
  response_reader(const response_reader&) = delete;
  response_reader& operator=(const response_reader&) = delete;

  /// Parses `bytes`, the ones received after those of earlier calls. Bytes it cannot use yet (a
  /// chunk's size cut in two) are kept for the next call; bytes past the response's end go to
  /// leftover().
  progress feed(std::string_view bytes);

  /// Once done: the bytes received past the response's end (the start of the next one).
  const std::string& leftover() const { return pending_; }

  /// The connection ended: a close-delimited body is complete, anything else is cut.
  progress end_of_stream();

  /// The response so far: status and headers once the head is parsed; the body at the end when
  /// there is no body handler.
  http_reply& reply() { return reply_; }

  /// Why it failed.
  const std::string& error() const { return error_; }

 private:
  struct parser_state;

  void after_parse();

  std::unique_ptr<parser_state> parser_;
  body_handler on_body_;
  http_reply reply_;
  bool head_read_ = false;
  std::string error_;
  std::string pending_;  // bytes received and not parsed
};

}  // namespace conveyor::client
