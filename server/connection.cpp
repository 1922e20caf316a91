// One HTTP connection: reads requests with Beast, routes them, runs completions on the backend
// and writes responses and event streams. Everything here runs on the connection's strand;
// backend threads only post onto it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
// GCC 12 with sanitizers sees a false "maybe uninitialized" boost::optional inside Beast 1.74's
// parser; silence that one warning for Beast's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#pragma GCC diagnostic pop
#include <spdlog/spdlog.h>

#include "chat/chat_template.hpp"
#include "common/error.hpp"
#include "server/errors.hpp"
#include "server/openai.hpp"
#include "server/server_state.hpp"

namespace conveyor::server::detail {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using error_code = boost::system::error_code;
using steady = std::chrono::steady_clock;

// A lingering close waits this long for the client to close its side.
constexpr std::chrono::milliseconds linger_time{500};

// Bytes read per read while watching a busy connection for a disconnect.
constexpr std::size_t watch_chunk = 4096;

// The Date header's value (RFC 7231 IMF-fixdate).
std::string http_date() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  auto n = std::strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(buf, n);
}

std::string reason_of(unsigned status) {
  if (status == 499) return "Client Closed Request";
  auto reason = http::obsolete_reason(http::int_to_status(status));
  return std::string{reason.data(), reason.size()};
}

std::string hex(std::size_t n) {
  char buf[32];
  auto len = std::snprintf(buf, sizeof(buf), "%zx", n);
  return std::string(buf, static_cast<std::size_t>(len));
}

// A name/value pair of an extra response header.
using header_field = std::pair<std::string, std::string>;

// One choice of the completion being answered.
struct choice_state {
  // The backend's grip on it; reset once it ended.
  std::shared_ptr<request_handle> handle;
  // Text so far (non-streamed answers only).
  std::string text;
  std::string finish_reason;
  completion_usage usage;
  bool done = false;
  // A chat stream sent this choice's first chunk (the assistant role).
  bool role_sent = false;
};

// The completion a connection is answering.
struct completion_job {
  // Matches the events of this job; events of older jobs are dropped.
  uint64_t serial = 0;
  completion_meta meta;
  bool stream = false;
  bool include_usage = false;
  std::vector<choice_state> choices;
  std::size_t remaining = 0;
};

class http_connection;

// Posts a member call onto a connection's strand from any thread, while the server lives.
struct event_poster {
  std::shared_ptr<post_gate> gate;
  std::weak_ptr<http_connection> conn;

  template <class F>
  void operator()(F fn) const;
};

class http_connection final : public connection,
                              public std::enable_shared_from_this<http_connection> {
 public:
  http_connection(server_state& st, tcp::socket socket)
      : st_(st),
        socket_(std::move(socket)),
        executor_(socket_.get_executor()),
        idle_timer_(executor_),
        write_timer_(executor_),
        linger_timer_(executor_) {}

  ~http_connection() override {
    // Only during the io_context's destruction can a job still be here.
    if (job_) cancel_job_requests();
    st_.remove_connection(this);
  }

  /// The strand; immutable, so any thread may read it.
  const net::any_io_executor& executor() const { return executor_; }

  void start(bool reject) {
    if (reject) {
      state_ = conn_state::busy;
      keep_alive_ = false;
      method_ = "-";
      respond_error(503, "server_error", "the server has too many open connections", "",
                    "too_many_connections", 1);
      return;
    }
    do_read();
  }

  void shutdown() override {
    net::post(executor_, [self = shared_from_this()] { self->on_shutdown(); });
  }

  // -- backend events (on the strand) ------------------------------------------------------------

  void on_text(uint64_t serial, std::size_t index, std::string text) {
    auto* job = live_job(serial, index);
    if (!job) return;
    if (!job->stream) {
      job->choices[index].text += text;
      return;
    }
    if (text.empty()) return;
    send_role(*job, index);
    if (!job_) return;
    send_event(render_chunk(job->meta, index, text, std::nullopt));
  }

  void on_finish(uint64_t serial, std::size_t index, std::string finish_reason,
                 completion_usage usage) {
    auto* job = live_job(serial, index);
    if (!job) return;
    auto& choice = job->choices[index];
    choice.done = true;
    choice.handle.reset();
    choice.finish_reason = std::move(finish_reason);
    choice.usage = usage;
    job->remaining -= 1;
    if (job->stream) {
      send_role(*job, index);
      if (!job_) return;
      send_event(render_chunk(job->meta, index, "", choice.finish_reason));
      if (!job_) return;  // the client was too slow and is gone
    }
    if (job->remaining > 0) return;
    if (job->stream) {
      if (job->include_usage) send_event(render_usage_chunk(job->meta, total_usage(*job)));
      if (!job_) return;
      send_event_text("data: [DONE]\n\n");
      if (!job_) return;
      end_job();
      end_stream();
      return;
    }
    std::vector<choice_result> results;
    results.reserve(job->choices.size());
    for (auto& c : job->choices)
      results.push_back({std::move(c.text), std::move(c.finish_reason), c.usage});
    auto body = render_completion(job->meta, results);
    end_job();
    respond(200, "application/json", std::move(body));
  }

  void on_error(uint64_t serial, std::size_t index, ec code, std::string message) {
    auto* job = live_job(serial, index);
    if (!job) return;
    job->choices[index].done = true;
    job->choices[index].handle.reset();
    fail_job(code, message);
  }

  void on_metrics(uint64_t serial, std::string text) {
    if (state_ != conn_state::busy || metrics_serial_ != serial) return;
    metrics_serial_ = 0;
    text += st_.metrics_text();
    respond(200, "text/plain; version=0.0.4; charset=utf-8", std::move(text));
  }

 private:
  enum class conn_state {
    // Waiting for (or reading) the next request.
    reading,
    // Answering a request.
    busy,
    // Our side is shut down; waiting briefly for the client to close.
    lingering,
    // Closed.
    closed,
  };

  // -- reading requests --------------------------------------------------------------------------

  void do_read() {
    if (shutdown_requested_) {
      hard_close();
      return;
    }
    state_ = conn_state::reading;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(
        st_.options.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
    parser_->body_limit(st_.options.max_body_bytes);
    auto generation = ++idle_generation_;
    idle_timer_.expires_after(st_.options.idle_timeout);
    idle_timer_.async_wait([self = shared_from_this(), generation](error_code ec) {
      if (!ec && generation == self->idle_generation_ && self->state_ == conn_state::reading)
        self->hard_close();
    });
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](error_code ec, std::size_t) { self->on_header(ec); });
  }

  // The header is in (the body limit is already checked against Content-Length): answer
  // "Expect: 100-continue" (curl sends it for bodies over 1 KiB), then read the body.
  void on_header(error_code ec) {
    if (state_ != conn_state::reading) return;
    if (ec || parser_->is_done()) {
      on_read(ec);
      return;
    }
    const auto& header = parser_->get();
    if (header.version() >= 11 && beast::iequals(header[http::field::expect], "100-continue")) {
      pending_ += "HTTP/1.1 100 Continue\r\n\r\n";
      flush();
    }
    http::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(error_code ec) {
    ++idle_generation_;
    idle_timer_.cancel();
    if (state_ != conn_state::reading) return;
    if (ec) {
      state_ = conn_state::busy;
      keep_alive_ = false;
      method_ = "-";
      target_ = "-";
      started_ = steady::now();
      if (ec == http::error::body_limit) {
        respond_error(
            413, "invalid_request_error",
            "the request body exceeds " + std::to_string(st_.options.max_body_bytes) + " bytes", "",
            "body_too_large");
      } else if (ec == http::error::header_limit) {
        respond_error(431, "invalid_request_error",
                      "the request line and headers exceed " +
                          std::to_string(st_.options.max_header_bytes) + " bytes",
                      "", "headers_too_large");
      } else if (ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
                 ec != http::error::end_of_stream && ec != http::error::partial_message) {
        respond_error(400, "invalid_request_error", "malformed HTTP request: " + ec.message(), "",
                      "bad_request");
      } else {
        // The client closed the connection or it broke: nothing to answer.
        hard_close();
      }
      return;
    }
    auto req = parser_->release();
    parser_.reset();
    handle(std::move(req));
  }

  // -- routing -----------------------------------------------------------------------------------

  void handle(http::request<http::string_body> req) {
    state_ = conn_state::busy;
    started_ = steady::now();
    keep_alive_ = req.keep_alive() && !st_.draining && !shutdown_requested_;
    http10_ = req.version() < 11;
    method_ = std::string{req.method_string()};
    target_ = std::string{req.target()};
    auto path = std::string_view{target_}.substr(0, std::string_view{target_}.find('?'));
    auto method = req.method();
    auto only = [&](http::verb allowed, const char* allow) {
      if (method == allowed) return true;
      respond_error(405, "invalid_request_error",
                    "method " + method_ + " is not allowed on " + std::string{path}, "",
                    "method_not_allowed", 0, {{"Allow", allow}});
      return false;
    };
    if (path == "/v1/completions") {
      if (only(http::verb::post, "POST")) handle_completion(req.body(), api_kind::completions);
    } else if (path == "/v1/chat/completions" && st_.options.chat_template) {
      if (only(http::verb::post, "POST"))
        handle_completion(req.body(), api_kind::chat_completions);
    } else if (path == "/v1/models") {
      if (only(http::verb::get, "GET"))
        respond(200, "application/json", render_models(st_.model, st_.created_at));
    } else if (path == "/health") {
      if (only(http::verb::get, "GET")) handle_health();
    } else if (path == "/metrics") {
      if (only(http::verb::get, "GET")) handle_metrics();
    } else {
      respond_error(404, "invalid_request_error", "no such endpoint: " + std::string{path}, "",
                    "not_found");
    }
  }

  void handle_health() {
    if (st_.draining)
      respond(503, "application/json", R"({"status":"draining"})");
    else if (!st_.ready)
      respond(503, "application/json", R"({"status":"loading"})");
    else
      respond(200, "application/json", R"({"status":"ok"})");
  }

  void handle_metrics() {
    auto serial = ++serial_;
    metrics_serial_ = serial;
    start_watch();
    try {
      st_.backend.collect_metrics([post = poster(), serial](std::string text) {
        post([serial, text = std::move(text)](http_connection& c) mutable {
          c.on_metrics(serial, std::move(text));
        });
      });
    } catch (const std::exception& e) {
      metrics_serial_ = 0;
      respond_error(500, "server_error", std::string{"collecting metrics failed: "} + e.what(), "",
                    "internal");
    }
  }

  void handle_completion(const std::string& body, api_kind kind) {
    if (st_.draining || shutdown_requested_) {
      keep_alive_ = false;
      respond_ec(ec::shutting_down, "the server is shutting down and takes no new requests");
      return;
    }
    auto parsed =
        kind == api_kind::chat_completions
            ? parse_chat_body(body, st_.backend.defaults(), *st_.options.chat_template)
            : parse_completion_body(body, st_.backend.defaults(), st_.options.max_prompts);
    if (auto* err = std::get_if<body_error>(&parsed)) {
      respond_error(400, "invalid_request_error", err->message, err->param,
                    to_string(ec::bad_request));
      return;
    }
    auto& request = std::get<completion_body>(parsed);
    auto job = std::make_unique<completion_job>();
    job->serial = ++serial_;
    job->meta = completion_meta{make_completion_id(kind), unix_now(), st_.model, kind};
    job->stream = request.stream;
    job->include_usage = request.include_usage;
    job->choices.resize(request.requests.size());
    job->remaining = request.requests.size();
    auto serial = job->serial;
    job_ = std::move(job);
    st_.job_started();
    start_watch();
    for (std::size_t i = 0; i < request.requests.size(); ++i) {
      std::shared_ptr<request_handle> handle;
      try {
        handle = st_.backend.submit(std::move(request.requests[i]), make_events(serial, i));
      } catch (const std::exception& e) {
        fail_job(ec::internal, std::string{"the backend failed to take the request: "} + e.what());
        return;
      }
      // Events are posted, so the job is still here even if the backend already answered.
      job_->choices[i].handle = std::move(handle);
    }
  }

  // -- completions -------------------------------------------------------------------------------

  event_poster poster() { return event_poster{st_.gate, weak_from_this()}; }

  completion_events make_events(uint64_t serial, std::size_t index) {
    completion_events events;
    events.on_text = [post = poster(), serial, index](std::string text) {
      post([serial, index, text = std::move(text)](http_connection& c) mutable {
        c.on_text(serial, index, std::move(text));
      });
    };
    events.on_finish = [post = poster(), serial, index](std::string reason,
                                                        completion_usage usage) {
      post([serial, index, reason = std::move(reason), usage](http_connection& c) mutable {
        c.on_finish(serial, index, std::move(reason), usage);
      });
    };
    events.on_error = [post = poster(), serial, index](ec code, std::string message) {
      post([serial, index, code, message = std::move(message)](http_connection& c) mutable {
        c.on_error(serial, index, code, std::move(message));
      });
    };
    return events;
  }

  // A chat stream opens each choice with a chunk carrying the assistant role, before its first
  // text or its end.
  void send_role(completion_job& job, std::size_t index) {
    auto& choice = job.choices[index];
    if (job.meta.kind != api_kind::chat_completions || choice.role_sent) return;
    choice.role_sent = true;
    send_event(render_role_chunk(job.meta, index));
  }

  // The running job when an event of (serial, index) still matters, else nullptr.
  completion_job* live_job(uint64_t serial, std::size_t index) {
    if (state_ != conn_state::busy || !job_ || job_->serial != serial) return nullptr;
    if (index >= job_->choices.size() || job_->choices[index].done) return nullptr;
    return job_.get();
  }

  static completion_usage total_usage(const completion_job& job) {
    completion_usage total;
    for (const auto& c : job.choices) {
      total.prompt_tokens += c.usage.prompt_tokens;
      total.completion_tokens += c.usage.completion_tokens;
    }
    return total;
  }

  // Ends the job with an error: cancels its other choices and tells the client, as an HTTP
  // error when nothing was sent yet, else as a last stream event.
  void fail_job(ec code, const std::string& message) {
    cancel_job_requests();
    auto info = to_http_error(code);
    if (code != ec::cancelled)
      spdlog::debug("{} {}: {} ({})", method_, target_, message, to_string(code));
    if (stream_started_) {
      send_event(render_error(message, info.type, "", to_string(code)));
      if (!job_) return;
      end_job();
      end_stream();
      return;
    }
    end_job();
    respond_ec(code, message);
  }

  void cancel_job_requests() {
    if (!job_) return;
    for (auto& c : job_->choices) {
      if (c.handle && !c.done) c.handle->cancel();
      c.handle.reset();
      c.done = true;
    }
  }

  void end_job() {
    if (!job_) return;
    job_.reset();
    st_.job_ended();
  }

  // Drops the job (cancelling its requests) because the client cannot be answered any more.
  void abandon_job() {
    if (!job_) return;
    cancel_job_requests();
    end_job();
  }

  // -- writing -----------------------------------------------------------------------------------

  // Queues a whole response; the connection reads the next request once it is written.
  void respond(unsigned status, std::string_view content_type, std::string body,
               const std::vector<header_field>& extra = {}) {
    auto head = response_head(status, extra);
    head += "Content-Type: ";
    head += content_type;
    head += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    pending_ += head;
    pending_ += body;
    response_done(status);
  }

  void respond_error(unsigned status, std::string_view type, const std::string& message,
                     std::string_view param, std::string_view code, int32_t retry_after_s = 0,
                     std::vector<header_field> extra = {}) {
    if (retry_after_s > 0) extra.emplace_back("Retry-After", std::to_string(retry_after_s));
    if (status >= 500 && status != 503)
      spdlog::warn("{} {} -> {}: {}", method_, target_, status, message);
    respond(status, "application/json", render_error(message, type, param, code), extra);
  }

  void respond_ec(ec code, const std::string& message) {
    auto info = to_http_error(code);
    respond_error(info.status, info.type, message, "", to_string(code), info.retry_after_s);
  }

  std::string response_head(unsigned status, const std::vector<header_field>& extra) {
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason_of(status) + "\r\n";
    head += "Server: conveyor\r\nDate: " + http_date() + "\r\n";
    if (!keep_alive_)
      head += "Connection: close\r\n";
    else if (http10_)
      head += "Connection: keep-alive\r\n";
    for (const auto& [name, value] : extra) head += name + ": " + value + "\r\n";
    return head;
  }

  // Sends the head of an event stream once: chunked for HTTP/1.1, close-delimited for 1.0.
  void start_stream() {
    if (stream_started_) return;
    stream_started_ = true;
    if (http10_) keep_alive_ = false;
    std::string head = response_head(200, {});
    head +=
        "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n";
    if (!http10_) head += "Transfer-Encoding: chunked\r\n";
    head += "\r\n";
    pending_ += head;
    st_.counters.count_response(200);
  }

  void send_event(const std::string& json) { send_event_text("data: " + json + "\n\n"); }

  // Queues one server-sent event; cuts a client off that lets too much pile up.
  void send_event_text(const std::string& event) {
    start_stream();
    if (http10_) {
      pending_ += event;
    } else {
      pending_ += hex(event.size());
      pending_ += "\r\n";
      pending_ += event;
      pending_ += "\r\n";
    }
    if (pending_.size() > st_.options.max_stream_buffer_bytes) {
      spdlog::warn("{} {}: the client reads too slowly ({} bytes unsent), closing it", method_,
                   target_, pending_.size());
      st_.counters.count_slow_client();
      hard_close();
      return;
    }
    flush();
  }

  void end_stream() {
    if (!http10_) pending_ += "0\r\n\r\n";
    stream_done_ = true;
    if (!writing_) finish_response_if_flushed();
    flush();
  }

  void response_done(unsigned status) {
    st_.counters.count_response(status);
    response_status_ = status;
    stream_done_ = true;
    flush();
  }

  void flush() {
    if (writing_ || pending_.empty()) return;
    if (state_ == conn_state::closed || state_ == conn_state::lingering) return;
    writing_ = true;
    out_.swap(pending_);
    pending_.clear();
    auto generation = ++write_generation_;
    write_timer_.expires_after(st_.options.idle_timeout);
    write_timer_.async_wait([self = shared_from_this(), generation](error_code ec) {
      if (ec || generation != self->write_generation_ || !self->writing_) return;
      spdlog::warn("{} {}: the client stopped reading, closing it", self->method_, self->target_);
      self->st_.counters.count_slow_client();
      self->hard_close();
    });
    net::async_write(
        socket_, net::buffer(out_),
        [self = shared_from_this()](error_code ec, std::size_t) { self->on_write(ec); });
  }

  void on_write(error_code ec) {
    writing_ = false;
    ++write_generation_;
    write_timer_.cancel();
    out_.clear();
    if (state_ == conn_state::closed) return;
    if (ec) {
      client_gone("writing failed: " + ec.message());
      return;
    }
    if (!pending_.empty()) {
      flush();
      return;
    }
    finish_response_if_flushed();
  }

  // Once the whole response is written: closes, or reads the next request.
  void finish_response_if_flushed() {
    if (!stream_done_ || writing_ || !pending_.empty() || state_ != conn_state::busy) return;
    stream_done_ = false;
    log_access();
    stream_started_ = false;
    if (!keep_alive_ || shutdown_requested_ || st_.draining) {
      graceful_close();
      return;
    }
    if (watching_) {
      // The disconnect watch holds the socket's read side; take it back first.
      read_after_watch_ = true;
      error_code ignored;
      socket_.cancel(ignored);
      return;
    }
    do_read();
  }

  void log_access() {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - started_);
    spdlog::debug("{} {} {} {} ms", method_, target_, stream_started_ ? 200 : response_status_,
                  ms.count());
  }

  // -- watching for disconnects ------------------------------------------------------------------

  // While a request is answered, a read stays pending so that a client that goes away is
  // noticed at once (and its requests cancelled). Bytes that arrive (a pipelined request) are
  // kept for the next request; a lingering connection throws them away.
  void start_watch() {
    if (watching_ || state_ == conn_state::closed) return;
    auto limit = st_.options.max_header_bytes + st_.options.max_body_bytes;
    if (state_ == conn_state::busy && buffer_.size() >= limit) return;
    watching_ = true;
    socket_.async_read_some(
        buffer_.prepare(watch_chunk),
        [self = shared_from_this()](error_code ec, std::size_t n) { self->on_watch(ec, n); });
  }

  void on_watch(error_code ec, std::size_t n) {
    watching_ = false;
    buffer_.commit(n);
    if (state_ == conn_state::closed) return;
    if (state_ == conn_state::lingering) {
      buffer_.consume(buffer_.size());
      if (ec)
        hard_close();
      else
        start_watch();
      return;
    }
    if (ec && ec != net::error::operation_aborted) {
      client_gone("the client closed the connection");
      return;
    }
    if (read_after_watch_) {
      read_after_watch_ = false;
      do_read();
      return;
    }
    if (!ec && state_ == conn_state::busy) start_watch();
  }

  // -- closing -----------------------------------------------------------------------------------

  void client_gone(const std::string& why) {
    if (job_) {
      spdlog::debug("{} {}: {}; cancelling the request", method_, target_, why);
      st_.counters.count_client_gone();
    }
    hard_close();
  }

  void on_shutdown() {
    shutdown_requested_ = true;
    switch (state_) {
      case conn_state::reading:
        hard_close();
        break;
      case conn_state::busy:
        keep_alive_ = false;
        if (job_) {
          fail_job(ec::shutting_down, "the server shut down before the request finished");
        } else if (metrics_serial_ != 0) {
          metrics_serial_ = 0;
          respond_ec(ec::shutting_down, "the server is shutting down");
        }
        // Otherwise a response is being written; the connection closes after it.
        break;
      case conn_state::lingering:
      case conn_state::closed:
        break;
    }
  }

  // Shuts our side down after the last response and waits briefly for the client to close
  // its side, so that it reads our response instead of a reset.
  void graceful_close() {
    if (state_ == conn_state::closed || state_ == conn_state::lingering) return;
    abandon_job();
    state_ = conn_state::lingering;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    linger_timer_.expires_after(std::min<steady::duration>(linger_time, st_.options.idle_timeout));
    linger_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->hard_close();
    });
    start_watch();
  }

  void hard_close() {
    if (state_ == conn_state::closed) return;
    state_ = conn_state::closed;
    abandon_job();
    metrics_serial_ = 0;
    ++idle_generation_;
    ++write_generation_;
    idle_timer_.cancel();
    write_timer_.cancel();
    linger_timer_.cancel();
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  // -- state -------------------------------------------------------------------------------------

  server_state& st_;
  tcp::socket socket_;
  const net::any_io_executor executor_;
  net::steady_timer idle_timer_;
  net::steady_timer write_timer_;
  net::steady_timer linger_timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  conn_state state_ = conn_state::reading;

  // The request being answered.
  uint64_t serial_ = 0;
  std::unique_ptr<completion_job> job_;
  uint64_t metrics_serial_ = 0;
  bool keep_alive_ = true;
  bool http10_ = false;
  std::string method_;
  std::string target_;
  steady::time_point started_;
  unsigned response_status_ = 0;

  // Writing: `out_` is being written, `pending_` waits.
  std::string out_;
  std::string pending_;
  bool writing_ = false;
  bool stream_started_ = false;
  // The whole response is queued; once it is written the connection moves on.
  bool stream_done_ = false;
  uint64_t write_generation_ = 0;
  uint64_t idle_generation_ = 0;

  bool watching_ = false;
  bool read_after_watch_ = false;
  bool shutdown_requested_ = false;
};

template <class F>
void event_poster::operator()(F fn) const {
  // The gate stays locked until the connection pointer is handed to the strand, so the
  // io_context cannot be destroyed in between.
  std::lock_guard<std::mutex> lock{gate->mutex};
  if (!gate->open) return;
  auto self = conn.lock();
  if (!self) return;
  auto ex = self->executor();
  net::post(ex, [self = std::move(self), fn = std::move(fn)]() mutable { fn(*self); });
}

}  // namespace

void start_connection(server_state& state, tcp::socket socket, bool reject) {
  auto conn = std::make_shared<http_connection>(state, std::move(socket));
  state.add_connection(conn);
  net::post(conn->executor(), [conn, reject] { conn->start(reject); });
}

}  // namespace conveyor::server::detail
