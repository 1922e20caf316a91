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
/// responses and stream heads go through Beast's serializer; stream events queued while a write
/// runs go out together in the next one.
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

  /// Queues one piece of the stream body (one whole server-sent event).
  void queue_stream_data(std::string bytes);

  /// Queues the stream's end (the last chunk; nothing when close-delimited).
  void queue_stream_end();

  /// Bytes of stream data queued and not yet handed to the socket.
  std::size_t queued_stream_bytes() const { return queued_stream_bytes_; }

  /// True while a write runs.
  bool writing() const { return writing_; }

  /// True when nothing is queued and no write runs.
  bool idle() const { return !writing_ && queue_.empty(); }

  /// Starts the next write unless one runs or nothing is queued; `on_written` is called when
  /// it ends. Returns whether a write started.
  bool flush(written_handler on_written);

  /// Drops everything queued (the connection is closing).
  void clear();

 private:
  // One thing to write.
  struct item {
    enum class kind { response, head, data, end } what = kind::data;
    // kind::response: the message (boxed: Beast's serializer keeps pointers into it).
    std::unique_ptr<string_response> response;
    // kind::head: the header and its serializer.
    std::unique_ptr<http::response<http::empty_body>> head;
    std::unique_ptr<http::response_serializer<http::empty_body>> head_serializer;
    // kind::data: the event's bytes.
    std::string bytes;
    // kind::data and kind::end: the stream is chunked (HTTP/1.1), else close-delimited.
    bool chunked = true;
  };

  // Writes the stream data and ends at the front of the queue in one gather write.
  void write_stream_pieces(std::function<void(boost::system::error_code, std::size_t)> done);

  boost::asio::ip::tcp::socket& socket_;
  std::deque<item> queue_;
  // What the running write refers to; kept until it ends.
  std::vector<item> in_flight_;
  // The chunk framing of the data in flight, and the buffers of that write.
  std::vector<http::chunk_body<boost::asio::const_buffer>> chunks_;
  std::vector<boost::asio::const_buffer> buffers_;
  std::size_t queued_stream_bytes_ = 0;
  // The stream being queued is chunked (HTTP/1.1).
  bool chunked_ = true;
  bool writing_ = false;
};

}  // namespace conveyor::server::detail
