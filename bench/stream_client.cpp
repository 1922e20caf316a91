#include "bench/stream_client.hpp"

#include <algorithm>
#include <array>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "client/http_client.hpp"
#include "client/response_reader.hpp"
#include "client/sse_parser.hpp"

namespace conveyor::bench {

namespace {

using clock_type = client_loops::clock_type;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// One request, from connecting to the end of its stream, on one event loop.
class stream_request : public std::enable_shared_from_this<stream_request> {
 public:
  stream_request(asio::io_context& io, const tcp::resolver::results_type& endpoints,
                 const target_options& o, const std::string& path, const std::string& body,
                 clock_type::time_point scheduled, client_loops::on_end done)
      : socket_(io),
        timer_(io),
        endpoints_(endpoints),
        where_(o.url.host + ":" + o.url.port),
        scheduled_(scheduled),
        timeout_(std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::duration<double>(o.timeout_s))),
        done_(std::move(done)),
        reader_(false, [this](const client::http_reply& head,
                              std::string_view bytes) { on_body(head, bytes); }),
        events_(
            [this](const std::string& data) { stream_.on_data(data, seconds_since(scheduled_)); }) {
    request_ = client::format_request("POST", o.url.prefix + path, where_, body,
                                      {{"Accept", "text/event-stream"}});
  }

  void start() {
    arm();
    asio::async_connect(socket_, endpoints_,
                        [self = shared_from_this()](boost::system::error_code ec, const auto&) {
                          self->connected(ec);
                        });
  }

 private:
  // The deadline of connecting, then of the response from the request's end.
  void arm() {
    timer_.expires_after(timeout_);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->ended_) return;
      self->timed_out_ = true;
      boost::system::error_code ignored;
      self->socket_.close(ignored);
    });
  }

  void connected(boost::system::error_code ec) {
    if (ec)
      return end(timed_out_ ? "timed out connecting to " + where_
                            : "cannot connect to " + where_ + ": " + ec.message());
    boost::system::error_code ignored;
    socket_.set_option(tcp::no_delay{true}, ignored);
    asio::async_write(socket_, asio::buffer(request_),
                      [self = shared_from_this()](boost::system::error_code e, std::size_t) {
                        if (e)
                          return self->end(self->timed_out_ ? "timed out writing the request"
                                                            : "write: " + e.message());
                        self->arm();
                        self->read();
                      });
  }

  void read() {
    socket_.async_read_some(asio::buffer(chunk_),
                            [self = shared_from_this()](boost::system::error_code ec,
                                                        std::size_t n) { self->received(ec, n); });
  }

  void received(boost::system::error_code ec, std::size_t n) {
    auto got = client::response_reader::progress::more;
    if (n > 0) got = reader_.feed({chunk_.data(), n});
    if (got == client::response_reader::progress::more && ec) {
      if (timed_out_) return end("timed out");
      if (ec != asio::error::eof) return end(ec.message());
      got = reader_.end_of_stream();
    }
    if (got == client::response_reader::progress::failed) return end(reader_.error());
    if (got == client::response_reader::progress::done) return end("");
    read();
  }

  void on_body(const client::http_reply& head, std::string_view bytes) {
    status_ = head.status;
    if (status_ == 200)
      events_.feed(bytes);
    else if (raw_.size() < 4000)
      raw_.append(bytes.data(), bytes.size());
  }

  // The request ended: its record goes to the run once.
  void end(std::string transport_error) {
    if (ended_) return;
    ended_ = true;
    timer_.cancel();
    boost::system::error_code ignored;
    socket_.close(ignored);
    if (status_ != 0 && status_ != 200) stream_.on_data(raw_, seconds_since(scheduled_));
    if (status_ == 0 && transport_error.empty()) transport_error = "no response";
    auto record =
        stream_.finish(status_ == 0 ? 200 : status_, transport_error, seconds_since(scheduled_));
    if (status_ == 0) {
      record.status = request_status::failed;
      record.message = transport_error;
    }
    done_(std::move(record));
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  const tcp::resolver::results_type& endpoints_;
  const std::string where_;  // host:port
  clock_type::time_point scheduled_;
  std::chrono::milliseconds timeout_;
  client_loops::on_end done_;
  std::string request_;  // its bytes
  client::response_reader reader_;
  client::sse_parser events_;
  completion_stream stream_;
  std::array<char, 16384> chunk_{};
  unsigned status_ = 0;
  std::string raw_;  // the body of a non-200 response
  bool timed_out_ = false;
  bool ended_ = false;
};

}  // namespace

struct client_loops::impl {
  target_options options;
  std::vector<std::unique_ptr<asio::io_context>> io;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  tcp::resolver::results_type endpoints;
  std::string resolve_error;

  asio::io_context& loop(std::size_t lane) { return *io[lane % io.size()]; }
};

client_loops::client_loops(const target_options& options) : impl_(std::make_unique<impl>()) {
  impl_->options = options;
  const std::size_t loops =
      options.client_threads > 0
          ? std::size_t(options.client_threads)
          : std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 4);
  for (std::size_t k = 0; k < loops; ++k) {
    impl_->io.push_back(std::make_unique<asio::io_context>(1));
    impl_->work.push_back(asio::make_work_guard(*impl_->io.back()));
  }
  for (auto& context : impl_->io) impl_->threads.emplace_back([&context] { context->run(); });
  boost::system::error_code ec;
  tcp::resolver resolver{*impl_->io.front()};
  impl_->endpoints = resolver.resolve(options.url.host, options.url.port, ec);
  if (ec) impl_->resolve_error = "cannot resolve " + options.url.host + ": " + ec.message();
}

client_loops::~client_loops() {
  join();
}

void client_loops::post(std::size_t lane, const std::string& path, std::string body,
                        clock_type::time_point scheduled, on_end done) {
  auto& context = impl_->loop(lane);
  asio::post(context, [this, &context, path, body = std::move(body), scheduled,
                       done = std::move(done)]() mutable {
    if (!impl_->resolve_error.empty()) {
      request_record record;
      record.status = request_status::failed;
      record.message = impl_->resolve_error;
      return done(std::move(record));
    }
    std::make_shared<stream_request>(context, impl_->endpoints, impl_->options, path, body,
                                     scheduled, std::move(done))
        ->start();
  });
}

void client_loops::run_at(std::size_t lane, clock_type::time_point when, std::function<void()> fn) {
  auto timer = std::make_shared<asio::steady_timer>(impl_->loop(lane), when);
  timer->async_wait([timer, fn = std::move(fn)](boost::system::error_code) mutable { fn(); });
}

void client_loops::join() {
  impl_->work.clear();
  for (auto& thread : impl_->threads)
    if (thread.joinable()) thread.join();
}

}  // namespace conveyor::bench
