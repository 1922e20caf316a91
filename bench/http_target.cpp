#include "bench/http_target.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include "bench/process_cpu.hpp"
#include "client/http_client.hpp"
#include "client/response_reader.hpp"
#include "client/sse_parser.hpp"
#include "common/host_port.hpp"

namespace conveyor::bench {

// -- URL -----------------------------------------------------------------------------------------

expected<target_url> parse_target_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0)
    return make_error(ec::bad_request, "--target " + url + ": expected http://HOST:PORT");
  auto rest = url.substr(scheme.size());
  target_url out;
  auto slash = rest.find('/');
  if (slash != std::string::npos) {
    out.prefix = rest.substr(slash);
    rest.resize(slash);
    while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  }
  if (rest.empty()) return make_error(ec::bad_request, "--target " + url + ": no host");
  if (rest.back() == ']' || rest.find(':') == std::string::npos) {  // no port: the default
    out.host = rest;
    return out;
  }
  auto address = parse_host_port(rest);
  if (!address) return make_error(ec::bad_request, "--target " + url + ": bad host or port");
  out.host = address->host;
  out.port = std::to_string(address->port);
  return out;
}

// -- server-sent events --------------------------------------------------------------------------

stream_event parse_stream_event(const std::string& data) {
  stream_event ev;
  if (data == "[DONE]") {
    ev.done = true;
    return ev;
  }
  auto j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    ev.error = "not JSON: " + data.substr(0, 200);
    return ev;
  }
  if (auto e = j.find("error"); e != j.end()) {
    std::string type;
    if (e->is_object()) {
      ev.error = e->value("message", std::string{"error"});
      type = e->value("type", std::string{});
    } else {
      ev.error = e->dump();
    }
    ev.refused = type == "invalid_request_error" || type == "rate_limit_error";
    return ev;
  }
  if (auto choices = j.find("choices"); choices != j.end() && choices->is_array() &&
                                        !choices->empty() && choices->front().is_object()) {
    const auto& c = choices->front();
    if (auto t = c.find("text"); t != c.end() && t->is_string()) ev.text = t->get<std::string>();
    if (auto f = c.find("finish_reason"); f != c.end() && f->is_string())
      ev.finish_reason = f->get<std::string>();
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object())
    if (auto n = u->find("completion_tokens"); n != u->end() && n->is_number_integer())
      ev.completion_tokens = n->get<int32_t>();
  return ev;
}

void completion_stream::on_data(const std::string& data, double now) {
  if (body_.size() < 2000) body_ += data;
  auto ev = parse_stream_event(data);
  if (ev.done) done_ = true;
  if (ev.error && !error_) {
    error_ = ev.error;
    refused_ = ev.refused;
  }
  if (!ev.text.empty()) {
    record_.chunk_times.push_back(now);
    ++text_chunks_;
  }
  if (ev.completion_tokens) usage_tokens_ = ev.completion_tokens;
  if (ev.finish_reason) finished_ = true;
}

request_record completion_stream::finish(unsigned http_status, const std::string& transport_error,
                                         double now) {
  record_.end = now;
  record_.output_tokens = usage_tokens_ ? *usage_tokens_ : text_chunks_;
  if (http_status != 200) {
    // The body of an error response is one JSON object, not events.
    auto ev = parse_stream_event(body_);
    record_.message = "HTTP " + std::to_string(http_status) + (ev.error ? ": " + *ev.error : "");
    record_.status =
        http_status >= 400 && http_status < 500 ? request_status::rejected : request_status::failed;
  } else if (error_) {
    record_.message = *error_;
    record_.status = refused_ ? request_status::rejected : request_status::failed;
  } else if (!transport_error.empty() && !done_) {
    record_.message = transport_error;
    record_.status = request_status::failed;
  } else if (!done_ && !finished_) {
    record_.message = "the stream ended without [DONE]";
    record_.status = request_status::failed;
  } else {
    record_.status = request_status::completed;
  }
  return record_;
}

// -- the driver ----------------------------------------------------------------------------------

namespace {

using clock_type = std::chrono::steady_clock;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// One request of a run, from connecting to the end of its stream, on one of the run's event
// loops: a client on the same cores as the server costs a thread per core, not one per request.
class stream_request : public std::enable_shared_from_this<stream_request> {
 public:
  using on_end = std::function<void(request_record)>;

  stream_request(asio::io_context& io, const tcp::resolver::results_type& endpoints,
                 const workload_request& w, const target_options& o,
                 clock_type::time_point scheduled, on_end done)
      : socket_(io), timer_(io), endpoints_(endpoints), where_(o.url.host + ":" + o.url.port),
        scheduled_(scheduled),
        timeout_(std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::duration<double>(o.timeout_s))),
        done_(std::move(done)),
        reader_(false, [this](const client::http_reply& head, std::string_view bytes) {
          on_body(head, bytes);
        }),
        events_([this](const std::string& data) {
          stream_.on_data(data, seconds_since(scheduled_));
        }) {
    nlohmann::json body = {{"prompt", w.prompt},
                           {"max_tokens", w.max_tokens},
                           {"stream", true},
                           {"stream_options", {{"include_usage", true}}}};
    if (!o.model.empty()) body["model"] = o.model;
    add_to_body(o.sampling, body);
    request_ = client::format_request("POST", o.url.prefix + "/v1/completions", where_,
                                      body.dump(), {{"Accept", "text/event-stream"}});
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
                        if (e) return self->end(self->timed_out_ ? "timed out writing the request"
                                                                 : "write: " + e.message());
                        self->arm();
                        self->read();
                      });
  }

  void read() {
    socket_.async_read_some(asio::buffer(chunk_), [self = shared_from_this()](
                                                      boost::system::error_code ec, std::size_t n) {
      self->received(ec, n);
    });
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
  on_end done_;
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

std::vector<request_record> run_target(const workload& requests, const target_options& options,
                                       run_progress& progress, run_timing& timing) {
  std::vector<request_record> records(requests.size());
  std::mutex mutex;
  std::condition_variable all_ended;
  std::size_t ended = 0;
  // Event loops (by default one per core, at most four), each on its own thread; request i goes
  // to loop i % loops, which runs all of its handlers, so a request is never handled by two
  // threads.
  const std::size_t loops =
      options.client_threads > 0
          ? std::size_t(options.client_threads)
          : std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 4);
  std::vector<std::unique_ptr<asio::io_context>> io;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < loops; ++k) {
    io.push_back(std::make_unique<asio::io_context>(1));
    work.push_back(asio::make_work_guard(*io.back()));
  }
  for (auto& context : io) threads.emplace_back([&context] { context->run(); });
  boost::system::error_code resolve_error;
  tcp::resolver resolver{*io.front()};
  const auto endpoints = resolver.resolve(options.url.host, options.url.port, resolve_error);
  const double cpu0 = process_cpu_seconds();
  const auto t0 = clock_type::now();
  auto last_end = t0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto scheduled = t0 + std::chrono::duration_cast<clock_type::duration>(
                                    std::chrono::duration<double>(requests[i].arrival_s));
    std::this_thread::sleep_until(scheduled);
    auto record_end = [&, i](request_record record) {
      const auto now = clock_type::now();
      std::lock_guard<std::mutex> guard{mutex};
      records[i] = std::move(record);
      last_end = std::max(last_end, now);
      ++ended;
      ++progress.ended;
      all_ended.notify_all();
    };
    if (resolve_error) {
      request_record record;
      record.status = request_status::failed;
      record.message = "cannot resolve " + options.url.host + ": " + resolve_error.message();
      record_end(std::move(record));
    } else {
      auto& context = *io[i % loops];
      asio::post(context, [&, i, scheduled, record_end] {
        std::make_shared<stream_request>(context, endpoints, requests[i], options, scheduled,
                                         record_end)
            ->start();
      });
    }
    ++progress.sent;
  }
  {
    std::unique_lock<std::mutex> guard{mutex};
    all_ended.wait(guard, [&] { return ended == requests.size(); });
  }
  work.clear();
  for (auto& thread : threads) thread.join();
  timing.cpu_s = process_cpu_seconds() - cpu0;
  timing.wall_s = std::chrono::duration<double>(last_end - t0).count();
  return records;
}

}  // namespace conveyor::bench
