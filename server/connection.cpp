// One HTTP connection: the per-connection state machine and its I/O. Reads requests with
// Beast, asks the router where they go, runs completions as completion_tasks on the backend
// (whose answers come through the event_poster), writes through the response_writer and the
// stream_sender, watches for the client going away and closes. Everything here runs on the
// connection's strand; backend threads only post onto it.
#include "server/connection.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
// GCC 12 with sanitizers sees a false "maybe uninitialized" boost::optional inside Beast 1.74's
// parser; silence that one warning for Beast's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#pragma GCC diagnostic pop
#include <spdlog/spdlog.h>

#include "chat/chat_template.hpp"
#include "common/error.hpp"
#include "server/completion_task.hpp"
#include "server/errors.hpp"
#include "server/event_poster.hpp"
#include "server/openai.hpp"
#include "server/response_writer.hpp"
#include "server/router.hpp"
#include "server/stream_sender.hpp"
#include "server/tokenize.hpp"

namespace conveyor::server::detail {

namespace {

namespace beast = boost::beast;
using error_code = boost::system::error_code;
using steady = std::chrono::steady_clock;

// A lingering close waits this long for the client to close its side.
constexpr std::chrono::milliseconds linger_time{500};

// Bytes read per read while watching a busy connection for a disconnect.
constexpr std::size_t watch_chunk = 4096;

class http_connection final : public connection,
                              public event_target,
                              public std::enable_shared_from_this<http_connection> {
 public:
  http_connection(server_state& st, tcp::socket socket)
      : st_(st),
        socket_(std::move(socket)),
        executor_(socket_.get_executor()),
        idle_timer_(executor_),
        head_timer_(executor_),
        write_timer_(executor_),
        linger_timer_(executor_),
        writer_(socket_),
        streams_(
            writer_, executor_, st_.options.stream_interval, st_.options.stream_delay,
            st_.options.max_stream_buffer_bytes, [this] { flush(); },
            [this] { return std::shared_ptr<void>{shared_from_this()}; }) {}

  ~http_connection() override {
    // Only during the io_context's destruction can a task still be here; its destructor
    // cancels what still runs.
    task_.reset();
    st_.remove_connection(this);
  }

  const net::any_io_executor& executor() const override { return executor_; }

  void start(refusal why) {
    if (why != refusal::none) {
      state_ = conn_state::busy;
      framing_.keep_alive = false;
      method_ = "-";
      if (why == refusal::server_full)
        respond_error(503, "server_error", "the server has too many open connections", "",
                      "too_many_connections", 1);
      else
        respond_error(429, "rate_limit_error",
                      "too many open connections from your address (at most " +
                          std::to_string(st_.options.max_connections_per_address) + ")",
                      "", "too_many_connections_per_address", 1);
      return;
    }
    do_read();
  }

  void shutdown() override {
    net::post(executor_, [self = shared_from_this()] { self->on_shutdown(); });
  }

  void check_deadlines() override {
    net::post(executor_, [self = shared_from_this()] { self->on_deadline(); });
  }

  // -- backend events (on the strand) ------------------------------------------------------------

  // One step of one choice: its stream events are rendered straight into the writer's stream
  // buffer and written with one flush.
  void on_step(uint64_t serial, std::size_t index, completion_step step) override {
    auto* task = live_task(serial, index);
    if (!task) return;
    auto out = task->on_step(index, std::move(step), streams_.buffer());
    if (out.failure) {
      if (!queue_events(out.event_count)) return;
      fail_task(out.failure->code, out.failure->message, out.failure->param);
      return;
    }
    deliver(std::move(out));
  }

  void on_metrics(uint64_t serial, std::string text) override {
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
    idle_deadline_ = st_.deadline_now() + st_.options.idle_timeout;
    wake_at_deadline(idle_timer_, st_.options.idle_timeout);
    // The first request's head is due from the connection's start; a later one's from its
    // first byte (until then the connection is idle).
    if (first_request_ || buffer_.size() > 0) {
      read_head();
      return;
    }
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code) {
      if (self->state_ == conn_state::reading) self->read_head();
    });
  }

  // Reads the request line and headers, which must all arrive within `header_timeout`.
  void read_head() {
    head_deadline_ = st_.deadline_now() + st_.options.header_timeout;
    wake_at_deadline(head_timer_, st_.options.header_timeout);
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](error_code ec, std::size_t) { self->on_header(ec); });
  }

  // Wakes `timer` after `wait` to look at the deadlines. The deadline clock never runs behind
  // the steady clock, so the deadline that armed it has passed by then (unless it was cleared).
  void wake_at_deadline(net::steady_timer& timer, steady::duration wait) {
    timer.expires_after(wait);
    timer.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->on_deadline();
    });
  }

  // Ends a connection whose request head or wait for its next request is past its deadline, on
  // the deadline clock (server_state::deadline_now).
  void on_deadline() {
    if (state_ != conn_state::reading) return;
    const auto now = st_.deadline_now();
    if (head_deadline_ && now >= *head_deadline_)
      on_head_timeout();
    else if (idle_deadline_ && now >= *idle_deadline_)
      hard_close();
  }

  // The head did not arrive in time (a slowloris, or a stalled client): 408 when part of it
  // came, else a plain close.
  void on_head_timeout() {
    st_.counters.count_head_timeout();
    bool got_some = buffer_.size() > 0 || parser_->got_some();
    spdlog::debug("closing a connection: its request head did not arrive within {} ms",
                  st_.options.header_timeout.count());
    head_deadline_.reset();
    idle_deadline_.reset();
    head_timer_.cancel();
    idle_timer_.cancel();
    if (!got_some) {
      hard_close();
      return;
    }
    // End the pending header read (it finds the connection busy and does nothing), then answer.
    error_code ignored;
    socket_.cancel(ignored);
    state_ = conn_state::busy;
    framing_.keep_alive = false;
    method_ = "-";
    target_ = "-";
    started_ = steady::now();
    respond_error(408, "invalid_request_error",
                  "the request line and headers did not arrive within " +
                      std::to_string(st_.options.header_timeout.count()) + " ms",
                  "", "request_timeout");
  }

  // The header is in (the body limit is already checked against Content-Length): answer
  // "Expect: 100-continue" (curl sends it for bodies over 1 KiB), then read the body.
  void on_header(error_code ec) {
    head_deadline_.reset();
    head_timer_.cancel();
    if (state_ != conn_state::reading) return;
    if (ec || parser_->is_done()) {
      on_read(ec);
      return;
    }
    const auto& header = parser_->get();
    if (header.version() >= 11 && beast::iequals(header[http::field::expect], "100-continue")) {
      writer_.queue_continue();
      flush();
    }
    http::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(error_code ec) {
    idle_deadline_.reset();
    idle_timer_.cancel();
    if (state_ != conn_state::reading) return;
    if (ec) {
      state_ = conn_state::busy;
      framing_.keep_alive = false;
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

  // -- dispatching -------------------------------------------------------------------------------

  void handle(http::request<http::string_body> req) {
    state_ = conn_state::busy;
    first_request_ = false;
    started_ = steady::now();
    framing_.keep_alive = req.keep_alive() && !st_.draining && !shutdown_requested_;
    framing_.http10 = req.version() < 11;
    method_ = std::string{req.method_string()};
    target_ = std::string{req.target()};
    auto routed = route(req.method(), method_, target_);
    if (auto* refusal = std::get_if<error_answer>(&routed)) {
      respond_answer(*refusal);
      return;
    }
    switch (std::get<endpoint>(routed)) {
      case endpoint::completions:
        handle_completion(req.body(), api_kind::completions);
        break;
      case endpoint::chat_completions:
        handle_completion(req.body(), api_kind::chat_completions);
        break;
      case endpoint::models:
        respond(200, "application/json", render_models(st_.model, st_.created_at));
        break;
      case endpoint::health: {
        auto [status, body] = health_answer(st_.ready, st_.draining);
        respond(status, "application/json", std::move(body));
        break;
      }
      case endpoint::metrics:
        handle_metrics();
        break;
      case endpoint::tokenize:
      case endpoint::detokenize: {
        auto answer =
            std::get<endpoint>(routed) == endpoint::tokenize
                ? answer_tokenize(req.body(), st_.backend, st_.options.chat_template.get(),
                                  st_.options.chat_refusal)
                : answer_detokenize(req.body(), st_.backend);
        if (auto* refusal = std::get_if<error_answer>(&answer))
          respond_answer(*refusal);
        else
          respond(200, "application/json", std::move(std::get<std::string>(answer)));
        break;
      }
    }
  }

  void handle_metrics() {
    auto serial = ++serial_;
    metrics_serial_ = serial;
    start_watch();
    try {
      st_.backend.collect_metrics(poster().metrics_reply(serial));
    } catch (const std::exception& e) {
      metrics_serial_ = 0;
      respond_error(500, "server_error", std::string{"collecting metrics failed: "} + e.what(), "",
                    "internal");
    }
  }

  void handle_completion(const std::string& body, api_kind kind) {
    if (st_.draining || shutdown_requested_) {
      framing_.keep_alive = false;
      respond_ec(ec::shutting_down, "the server is shutting down and takes no new requests");
      return;
    }
    request_context ctx;
    ctx.served_model = st_.model;
    ctx.defaults = st_.backend.defaults();
    ctx.chat_template = st_.options.chat_template.get();
    ctx.tool_chat_template = st_.options.tool_chat_template.get();
    ctx.chat_refusal = st_.options.chat_refusal;
    ctx.tool_call_parser = st_.options.tool_call_parser;
    ctx.max_prompts = st_.options.max_prompts;
    ctx.max_n = st_.options.max_n;
    auto read = read_completion_request(body, kind, ctx);
    if (auto* refusal = std::get_if<error_answer>(&read)) {
      respond_answer(*refusal);
      return;
    }
    auto& request = std::get<completion_body>(read);
    auto serial = ++serial_;
    task_ = std::make_unique<completion_task>(
        serial, completion_meta{make_completion_id(kind), unix_now(), st_.model, kind},
        request.stream, request.include_usage, request.requests.size(), request.n);
    task_->read_tool_calls(request.tool_calls);
    st_.job_started();
    start_watch();
    auto failure = task_->submit(
        st_.backend, std::move(request.requests),
        [post = poster(), serial](std::size_t index) { return post.choice_events(serial, index); });
    if (failure) fail_task(ec::internal, *failure);
  }

  // -- completions -------------------------------------------------------------------------------

  event_poster poster() { return event_poster{st_.gate, weak_from_this()}; }

  // The running task when an event of (serial, index) still matters, else nullptr.
  completion_task* live_task(uint64_t serial, std::size_t index) {
    if (state_ != conn_state::busy || !task_ || task_->serial() != serial) return nullptr;
    return task_->accepts(index) ? task_.get() : nullptr;
  }

  // Writes what the task answered to an event (its stream events are already in the writer's
  // buffer); ends the task when it finished. Queueing may close the connection
  // (a slow client), which drops the task.
  void deliver(task_output out) {
    if (!queue_events(out.event_count)) return;
    if (!out.finished) {
      // A fast stream's events may wait a little to go out together (stream_sender); a choice's
      // first events (its time to first token) never wait.
      streams_.send(out.event_count, out.opens_choice);
      return;
    }
    if (task_->stream()) {
      end_task();
      end_stream();
      return;
    }
    end_task();
    respond(200, "application/json", std::move(out.body));
  }

  // Ends the task with an error: cancels its other choices and tells the client, as an HTTP
  // error when nothing was sent yet, else as a last stream event.
  void fail_task(ec code, const std::string& message, const std::string& param = {}) {
    if (task_) task_->cancel();
    auto info = to_http_error(code);
    if (code != ec::cancelled)
      spdlog::debug("{} {}: {} ({})", method_, target_, message, to_string(code));
    if (streams_.started()) {
      auto& sse = streams_.buffer();
      sse += "data: ";
      sse += render_error(message, info.type, param, to_string(code));
      sse += "\n\n";
      if (!queue_events(1)) return;
      end_task();
      end_stream();
      return;
    }
    end_task();
    respond_ec(code, message, param);
  }

  void end_task() {
    if (!task_) return;
    task_.reset();
    st_.job_ended();
  }

  // Drops the task (cancelling its requests) because the client cannot be answered any more.
  void abandon_task() {
    if (!task_) return;
    task_->cancel();
    end_task();
  }

  // -- writing -----------------------------------------------------------------------------------

  // Queues a whole response; the connection reads the next request once it is written.
  void respond(unsigned status, std::string_view content_type, std::string body,
               const std::vector<header_field>& extra = {}) {
    writer_.queue_response(make_response(status, content_type, std::move(body), framing_, extra));
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

  void respond_answer(const error_answer& a) {
    respond_error(a.status, a.type, a.message, a.param, a.code, 0, a.extra);
  }

  void respond_ec(ec code, const std::string& message, const std::string& param = {}) {
    auto info = to_http_error(code);
    respond_error(info.status, info.type, message, param, to_string(code), info.retry_after_s);
  }

  // After `events` stream events were written into the stream buffer: starts the stream (its
  // head goes out before them) and cuts off a client that lets too much pile up. Returns false
  // when the connection closed. The caller flushes.
  bool queue_events(std::size_t events) {
    if (events == 0) return true;
    if (streams_.start(framing_)) st_.counters.count_response(200);
    if (!streams_.too_much_unsent()) return true;
    spdlog::warn("{} {}: the client reads too slowly ({} bytes unsent), closing it", method_,
                 target_, writer_.queued_stream_bytes());
    st_.counters.count_slow_client();
    hard_close();
    return false;
  }

  void end_stream() {
    streams_.end();
    stream_done_ = true;
    if (!writer_.writing()) finish_response_if_flushed();
    flush();
  }

  void response_done(unsigned status) {
    st_.counters.count_response(status);
    response_status_ = status;
    stream_done_ = true;
    flush();
  }

  void flush() {
    if (state_ == conn_state::closed || state_ == conn_state::lingering) return;
    if (!writer_.flush([self = shared_from_this()](error_code ec) { self->on_write(ec); })) return;
    write_started_ = steady::now();
    if (!write_watch_armed_) watch_write(st_.options.idle_timeout);
  }

  // Closes the connection once one write has run for idle_timeout. One timer serves every
  // write: when it expires during a newer write it waits out that write's remaining time, and
  // it is not armed again while nothing is written (a write per step per stream would
  // otherwise set and cancel a timer each time).
  void watch_write(steady::duration wait) {
    write_watch_armed_ = true;
    write_timer_.expires_after(wait);
    write_timer_.async_wait([self = shared_from_this()](error_code ec) {
      self->write_watch_armed_ = false;
      if (ec || self->state_ == conn_state::closed || !self->writer_.writing()) return;
      const auto running = steady::now() - self->write_started_;
      if (running < self->st_.options.idle_timeout) {
        self->watch_write(self->st_.options.idle_timeout - running);
        return;
      }
      spdlog::warn("{} {}: the client stopped reading, closing it", self->method_, self->target_);
      self->st_.counters.count_slow_client();
      self->hard_close();
    });
  }

  void on_write(error_code ec) {
    if (state_ == conn_state::closed) return;
    if (ec) {
      client_gone("writing failed: " + ec.message());
      return;
    }
    if (!writer_.idle()) {
      flush();
      return;
    }
    finish_response_if_flushed();
  }

  // Once the whole response is written: closes, or reads the next request.
  void finish_response_if_flushed() {
    if (!stream_done_ || !writer_.idle() || state_ != conn_state::busy) return;
    stream_done_ = false;
    log_access();
    streams_.reset();
    if (!framing_.keep_alive || shutdown_requested_ || st_.draining) {
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
    spdlog::debug("{} {} {} {} ms", method_, target_, streams_.started() ? 200 : response_status_,
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
    if (task_) {
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
        framing_.keep_alive = false;
        if (task_) {
          fail_task(ec::shutting_down, "the server shut down before the request finished");
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
    abandon_task();
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
    abandon_task();
    writer_.clear();
    metrics_serial_ = 0;
    idle_deadline_.reset();
    head_deadline_.reset();
    idle_timer_.cancel();
    head_timer_.cancel();
    write_timer_.cancel();
    linger_timer_.cancel();
    streams_.close();
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  // -- state -------------------------------------------------------------------------------------

  server_state& st_;
  tcp::socket socket_;
  const net::any_io_executor executor_;
  // Wake the connection at its idle and head deadlines (on_deadline looks at them).
  net::steady_timer idle_timer_;
  net::steady_timer head_timer_;
  // On the deadline clock (server_state::deadline_now): the end of the wait for the next request
  // and of its reading (idle_timeout), and of the request head being read (header_timeout).
  std::optional<steady::time_point> idle_deadline_;
  std::optional<steady::time_point> head_deadline_;
  net::steady_timer write_timer_;
  net::steady_timer linger_timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  conn_state state_ = conn_state::reading;
  response_writer writer_;
  // The event streams through writer_: their head, pacing and end.
  stream_sender streams_;

  // The request being answered.
  uint64_t serial_ = 0;
  std::unique_ptr<completion_task> task_;
  uint64_t metrics_serial_ = 0;
  framing framing_;
  std::string method_;
  std::string target_;
  steady::time_point started_;
  unsigned response_status_ = 0;

  // The whole response is queued; once it is written the connection moves on.
  bool stream_done_ = false;
  // The running write's start, and whether write_timer_ waits for it.
  steady::time_point write_started_;
  bool write_watch_armed_ = false;
  // No request was read yet: its head is due from the connection's start.
  bool first_request_ = true;

  bool watching_ = false;
  bool read_after_watch_ = false;
  bool shutdown_requested_ = false;
};

}  // namespace

void start_connection(server_state& state, tcp::socket socket, const std::string& address,
                      refusal why) {
  auto conn = std::make_shared<http_connection>(state, std::move(socket));
  state.add_connection(conn, address, why == refusal::none);
  net::post(conn->executor(), [conn, why] { conn->start(why); });
}

}  // namespace conveyor::server::detail
