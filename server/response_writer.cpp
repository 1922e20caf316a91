// The output side of one connection: Beast messages through Beast's serializer, event streams
// as Beast chunks.
#include "server/response_writer.hpp"

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
  item it;
  it.what = item::kind::head;
  it.head = std::make_unique<http::response<http::empty_body>>(http::status::continue_, 11);
  it.head_serializer = std::make_unique<http::response_serializer<http::empty_body>>(*it.head);
  queue_.push_back(std::move(it));
}

void response_writer::queue_response(string_response response) {
  item it;
  it.what = item::kind::response;
  it.response = std::make_unique<string_response>(std::move(response));
  queue_.push_back(std::move(it));
}

void response_writer::queue_stream_head(const framing& how) {
  item it;
  it.what = item::kind::head;
  it.head = std::make_unique<http::response<http::empty_body>>();
  set_common_fields(*it.head, 200, how, {});
  it.head->set(http::field::content_type, "text/event-stream");
  it.head->set(http::field::cache_control, "no-cache");
  it.head->set("X-Accel-Buffering", "no");
  chunked_ = !how.http10;
  // Transfer-Encoding: chunked; a close-delimited body has neither it nor Content-Length.
  if (chunked_) it.head->chunked(true);
  it.head_serializer = std::make_unique<http::response_serializer<http::empty_body>>(*it.head);
  queue_.push_back(std::move(it));
}

void response_writer::queue_stream_data(std::string bytes) {
  if (bytes.empty()) return;  // an empty chunk would end a chunked body
  queued_stream_bytes_ += bytes.size();
  item it;
  it.what = item::kind::data;
  it.bytes = std::move(bytes);
  it.chunked = chunked_;
  queue_.push_back(std::move(it));
}

void response_writer::queue_stream_end() {
  item it;
  it.what = item::kind::end;
  it.chunked = chunked_;
  queue_.push_back(std::move(it));
}

bool response_writer::flush(written_handler on_written) {
  if (writing_ || queue_.empty()) return false;
  writing_ = true;
  in_flight_.clear();
  auto done = [this, on_written = std::move(on_written)](error_code ec, std::size_t) {
    writing_ = false;
    in_flight_.clear();
    chunks_.clear();
    buffers_.clear();
    on_written(ec);
  };
  auto& front = queue_.front();
  switch (front.what) {
    case item::kind::response:
      in_flight_.push_back(std::move(front));
      queue_.pop_front();
      http::async_write(socket_, *in_flight_.back().response, std::move(done));
      break;
    case item::kind::head:
      in_flight_.push_back(std::move(front));
      queue_.pop_front();
      http::async_write_header(socket_, *in_flight_.back().head_serializer, std::move(done));
      break;
    case item::kind::data:
    case item::kind::end:
      write_stream_pieces(std::move(done));
      break;
  }
  return true;
}

void response_writer::write_stream_pieces(
    std::function<void(boost::system::error_code, std::size_t)> done) {
  // Take every stream piece up to the next message; strings are moved before any buffer points
  // into them.
  while (!queue_.empty() &&
         (queue_.front().what == item::kind::data || queue_.front().what == item::kind::end)) {
    in_flight_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  chunks_.reserve(in_flight_.size());
  static const auto last_chunk = http::make_chunk_last();
  for (const auto& it : in_flight_) {
    if (it.what == item::kind::data) {
      queued_stream_bytes_ -= it.bytes.size();
      if (!it.chunked) {
        buffers_.push_back(net::buffer(it.bytes));
        continue;
      }
      chunks_.push_back(http::make_chunk(net::const_buffer(net::buffer(it.bytes))));
      for (auto b = net::buffer_sequence_begin(chunks_.back());
           b != net::buffer_sequence_end(chunks_.back()); ++b)
        buffers_.push_back(*b);
    } else if (it.chunked) {
      for (auto b = net::buffer_sequence_begin(last_chunk); b != net::buffer_sequence_end(last_chunk);
           ++b)
        buffers_.push_back(*b);
    }
  }
  net::async_write(socket_, buffers_, std::move(done));
}

void response_writer::clear() {
  queue_.clear();
  queued_stream_bytes_ = 0;
}

}  // namespace conveyor::server::detail
