#include "client/response_reader.hpp"

#include <algorithm>
#include <cctype>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

namespace conveyor::client {

namespace http = boost::beast::http;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

struct response_reader::parser_state {
  http::response_parser<http::string_body> parser;
};

response_reader::response_reader(bool head_request, body_handler on_body)
    : parser_(std::make_unique<parser_state>()), on_body_(std::move(on_body)) {
  auto& p = parser_->parser;
  p.body_limit(boost::none);
  p.eager(true);
  if (head_request) p.skip(true);
}

response_reader::~response_reader() = default;

void response_reader::after_parse() {
  auto& p = parser_->parser;
  if (p.is_header_done() && !head_read_) {
    head_read_ = true;
    const auto& head = p.get();
    reply_.status = head.result_int();
    for (const auto& field : head)
      reply_.headers[lower(std::string{field.name_string()})] = std::string{field.value()};
    if (on_body_) on_body_(reply_, {});
  }
  auto& body = p.get().body();
  if (on_body_ && !body.empty()) {
    on_body_(reply_, body);
    body.clear();
  }
}

response_reader::progress response_reader::feed(std::string_view bytes) {
  auto& p = parser_->parser;
  pending_.append(bytes.data(), bytes.size());
  std::size_t used = 0;
  while (used < pending_.size() && !p.is_done()) {
    boost::beast::error_code ec;
    const auto n = p.put(boost::asio::buffer(pending_.data() + used, pending_.size() - used), ec);
    used += n;
    if (ec && ec != http::error::need_more) {
      error_ = "malformed response: " + ec.message();
      return progress::failed;
    }
    after_parse();
    if (ec == http::error::need_more || n == 0) break;
  }
  pending_.erase(0, used);
  if (!p.is_done()) return progress::more;
  if (!on_body_) reply_.body = std::move(p.get().body());
  return progress::done;
}

response_reader::progress response_reader::end_of_stream() {
  auto& p = parser_->parser;
  if (p.is_done()) return progress::done;
  if (!p.got_some()) {
    error_ = "the server closed the connection before a response";
    return progress::failed;
  }
  // The end of the connection ends a close-delimited body.
  boost::beast::error_code ec;
  p.put_eof(ec);
  after_parse();
  if (ec || !p.is_done()) {
    error_ = ec ? "the server closed the connection" : "the connection ended within the response";
    return progress::failed;
  }
  if (!on_body_) reply_.body = std::move(p.get().body());
  return progress::done;
}

}  // namespace conveyor::client
