// Internal: the output side of one connection. Responses are Beast messages written with Beast's
// serializer; an event stream is a Beast header followed by chunks made with `http::make_chunk`
// (close-delimited for HTTP/1.0 clients). Runs on the connection's strand.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
// GCC 12 with sanitizers sees a false "maybe uninitialized" boost::optional inside Beast 1.74's
// parser and serializer; silence that one warning for Beast's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>
#pragma GCC diagnostic pop

namespace conveyor::server::detail {

namespace http = boost::beast::http;

/// A name/value pair of an extra response header.
using header_field = std::pair<std::string, std::string>;

/// A whole response with a body.
using string_response = http::response<http::string_body>;

/// How the request being answered wants its answer framed.
struct framing {
  /// The connection stays open after the response.
  bool keep_alive = true;
  /// The request was HTTP/1.0: keep-alive must be said, streams are close-delimited.
  bool http10 = false;
};

/// The reason phrase of `status` (Beast's, plus nginx's 499 "Client Closed Request").
std::string reason_of(unsigned status);

/// Builds a whole HTTP/1.1 response: Server, Date, Connection (close, or keep-alive for an
/// HTTP/1.0 client that keeps the connection), `extra`, Content-Type and Content-Length.
string_response make_response(unsigned status, std::string_view content_type, std::string body,
                              const framing& how, const std::vector<header_field>& extra = {});

/// Queues what one connection writes and writes it in order, one write at a time. Whole
/// responses and stream heads go through Beast's serializer. Stream data is one growing buffer
/// that events are rendered into directly (`stream_buffer`); while a write runs it gathers
/// whatever is added, and the next write sends all of it as one chunk (with the stream's end
/// when that is queued): one socket write however many events came meanwhile.
class response_writer {
 public:
  /// Called once each write finished (or failed).
  using written_handler = std::function<void(boost::system::error_code)>;

  /// Writes to `socket`, which outlives the writer.
  explicit response_writer(boost::asio::ip::tcp::socket& socket) : socket_(socket) {}

  /// Queues the interim "100 Continue" answer.
  void queue_continue();

  /// Queues a whole response.
  void queue_response(string_response response);

  /// Queues the head of a `text/event-stream` answer (status 200): chunked for HTTP/1.1,
  /// close-delimited for HTTP/1.0 (then `how.keep_alive` must be false).
  void queue_stream_head(const framing& how);

  /// The stream data not yet handed to the socket, to append whole server-sent events to; it
  /// is written after every queued message (the stream's head must be queued before a flush).
  std::string& stream_buffer() { return stream_; }

  /// Appends one piece of the stream body (whole server-sent events).
  void queue_stream_data(std::string_view bytes) { stream_.append(bytes.data(), bytes.size()); }

  /// Queues the stream's end (the last chunk; nothing when close-delimited). The end is due
  /// at once, with all stream data before it.
  void queue_stream_end() { end_queued_ = true; }

  /// With `hold` (a stream interval), stream data waits in the buffer until `release_stream`
  /// or the stream's end; without it (the default) it goes out with the next flush.
  void hold_stream_until_released(bool hold) { hold_ = hold; }

  /// Lets the stream data queued so far (and whatever joins it before the write starts) go
  /// out with the next write.
  void release_stream() { released_ = true; }

  /// Bytes of stream data queued and not yet handed to the socket.
  std::size_t queued_stream_bytes() const { return stream_.size(); }

  /// True while a write runs.
  bool writing() const { return writing_; }

  /// True when nothing is queued and no write runs.
  bool idle() const { return !writing_ && queue_.empty() && stream_.empty() && !end_queued_; }

  /// Starts the next write unless one runs or nothing is due (queued messages, or stream data
  /// not held); `on_written` is called when it ends. Returns whether a write started.
  bool flush(written_handler on_written);

  /// Socket writes started so far (each one async_write of one gathered buffer sequence).
  std::size_t writes_started() const { return writes_started_; }

  /// Drops everything queued (the connection is closing).
  void clear();

 private:
  // One message to write: a whole response or a head (with its serializer).
  struct message {
    // A whole response (boxed: Beast's serializer keeps pointers into it).
    std::unique_ptr<string_response> response;
    // Otherwise a header and its serializer.
    std::unique_ptr<http::response<http::empty_body>> head;
    std::unique_ptr<http::response_serializer<http::empty_body>> head_serializer;
  };

  // Writes the stream data gathered so far (and the end when queued) in one write.
  void write_stream(std::function<void(boost::system::error_code, std::size_t)> done);

  boost::asio::ip::tcp::socket& socket_;
  std::deque<message> queue_;
  // The message being written; kept until its write ends.
  message in_flight_;
  // Stream data not yet written, and the data of the running write (swapped, so both keep
  // their capacity and a steady stream allocates nothing).
  std::string stream_;
  std::string writing_bytes_;
  // The chunk-size line of the running write ("1a2\r\n").
  char chunk_head_[20] = {};
  std::vector<boost::asio::const_buffer> buffers_;
  bool end_queued_ = false;
  // Stream data waits for release_stream (a stream interval); released_: it was released.
  bool hold_ = false;
  bool released_ = false;
  // The stream being queued is chunked (HTTP/1.1).
  bool chunked_ = true;
  bool writing_ = false;
  std::size_t writes_started_ = 0;
};

}  // namespace conveyor::server::detail
