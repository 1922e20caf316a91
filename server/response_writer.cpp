// The output side of one connection: Beast messages through Beast's serializer, event streams
// as Beast chunks.
#include "server/response_writer.hpp"

#include <cstdio>
#include <ctime>

#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/write.hpp>
#pragma GCC diagnostic pop

namespace conveyor::server::detail {

namespace net = boost::asio;
using error_code = boost::system::error_code;

namespace {

// Bytes of stream buffer a connection keeps between writes.
constexpr std::size_t kept_capacity = 64 * 1024;

// The Date header's value (RFC 7231 IMF-fixdate).
std::string http_date() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  auto n = std::strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(buf, n);
}

// Status line, Server, Date, Connection and the extra fields: what every response starts with.
template <class Body>
void set_common_fields(http::response<Body>& res, unsigned status, const framing& how,
                       const std::vector<header_field>& extra) {
  res.version(11);
  res.result(status);
  res.reason(reason_of(status));
  res.set(http::field::server, "conveyor");
  res.set(http::field::date, http_date());
  if (!how.keep_alive)
    res.set(http::field::connection, "close");
  else if (how.http10)
    res.set(http::field::connection, "keep-alive");
  for (const auto& [name, value] : extra) res.insert(name, value);
}

}  // namespace

std::string reason_of(unsigned status) {
  if (status == 499) return "Client Closed Request";
  auto reason = http::obsolete_reason(http::int_to_status(status));
  return std::string{reason.data(), reason.size()};
}

string_response make_response(unsigned status, std::string_view content_type, std::string body,
                              const framing& how, const std::vector<header_field>& extra) {
  string_response res;
  set_common_fields(res, status, how, extra);
  res.set(http::field::content_type,
          boost::beast::string_view{content_type.data(), content_type.size()});
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

void response_writer::queue_continue() {
  message m;
  m.head = std::make_unique<http::response<http::empty_body>>(http::status::continue_, 11);
  m.head_serializer = std::make_unique<http::response_serializer<http::empty_body>>(*m.head);
  queue_.push_back(std::move(m));
}

void response_writer::queue_response(string_response response) {
  message m;
  m.response = std::make_unique<string_response>(std::move(response));
  queue_.push_back(std::move(m));
}

void response_writer::queue_stream_head(const framing& how) {
  message m;
  m.head = std::make_unique<http::response<http::empty_body>>();
  set_common_fields(*m.head, 200, how, {});
  m.head->set(http::field::content_type, "text/event-stream");
  m.head->set(http::field::cache_control, "no-cache");
  m.head->set("X-Accel-Buffering", "no");
  chunked_ = !how.http10;
  // Transfer-Encoding: chunked; a close-delimited body has neither it nor Content-Length.
  if (chunked_) m.head->chunked(true);
  m.head_serializer = std::make_unique<http::response_serializer<http::empty_body>>(*m.head);
  queue_.push_back(std::move(m));
}

bool response_writer::flush(written_handler on_written) {
  if (writing_ || idle()) return false;
  if (queue_.empty() && hold_ && !released_ && !end_queued_) return false;
  writing_ = true;
  ++writes_started_;
  auto done = [this, on_written = std::move(on_written)](error_code ec, std::size_t) {
    writing_ = false;
    in_flight_ = message{};
    // Keep the capacity of a steady stream, not that of a burst a slow reader let pile up.
    if (writing_bytes_.capacity() > kept_capacity)
      std::string{}.swap(writing_bytes_);
    else
      writing_bytes_.clear();
    buffers_.clear();
    on_written(ec);
  };
  if (queue_.empty()) {
    write_stream(std::move(done));
    return true;
  }
  in_flight_ = std::move(queue_.front());
  queue_.pop_front();
  if (in_flight_.response)
    http::async_write(socket_, *in_flight_.response, std::move(done));
  else
    http::async_write_header(socket_, *in_flight_.head_serializer, std::move(done));
  return true;
}

void response_writer::write_stream(std::function<void(boost::system::error_code, std::size_t)> done) {
  writing_bytes_.swap(stream_);
  const bool end = end_queued_;
  end_queued_ = false;
  released_ = false;
  if (!chunked_) {
    // Close-delimited (HTTP/1.0): the bytes as they are; the end is the close.
    if (!writing_bytes_.empty()) buffers_.push_back(net::buffer(writing_bytes_));
  } else {
    if (!writing_bytes_.empty()) {
      // One chunk with everything gathered (an empty chunk would end the body).
      auto n = std::snprintf(chunk_head_, sizeof(chunk_head_), "%zx\r\n", writing_bytes_.size());
      buffers_.push_back(net::buffer(chunk_head_, std::size_t(n)));
      buffers_.push_back(net::buffer(writing_bytes_));
      buffers_.push_back(net::buffer("\r\n", 2));
    }
    if (end) buffers_.push_back(net::buffer("0\r\n\r\n", 5));
  }
  net::async_write(socket_, buffers_, std::move(done));
}

void response_writer::clear() {
  queue_.clear();
  stream_.clear();
  end_queued_ = false;
  released_ = false;
}

}  // namespace conveyor::server::detail
