#include "server/http_server.hpp"

#include <algorithm>
#include <sstream>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "common/prometheus.hpp"
#include "server/connection.hpp"
#include "server/server_state.hpp"

namespace conveyor::server {

namespace detail {

// -- counters ------------------------------------------------------------------------------------

void http_counters::count_response(unsigned status) {
  std::lock_guard<std::mutex> lock{mutex_};
  responses_[status] += 1;
}

std::string http_counters::render(std::size_t open_connections, int64_t running_requests) const {
  using namespace conveyor::prometheus;
  std::string out;
  write_header(out, "conveyor_http_connections", "Open HTTP connections.", "gauge");
  write_sample(out, "conveyor_http_connections", {}, uint64_t{open_connections});
  write_header(out, "conveyor_http_running_completions", "Completions being answered.", "gauge");
  write_sample(out, "conveyor_http_running_completions", {}, double(running_requests));
  write_header(out, "conveyor_http_responses_total", "HTTP responses by status code.", "counter");
  {
    std::lock_guard<std::mutex> lock{mutex_};
    for (const auto& [status, count] : responses_)
      write_sample(out, "conveyor_http_responses_total", label("code", std::to_string(status)),
                   uint64_t{count});
  }
  write_counter(out, "conveyor_http_client_disconnects_total",
                "Completions cancelled because their client went away.", client_gone_.load());
  write_counter(out, "conveyor_http_slow_client_disconnects_total",
                "Connections closed because their client read too slowly.", slow_clients_.load());
  write_counter(out, "conveyor_http_request_head_timeouts_total",
                "Connections closed because their request head did not arrive in time.",
                head_timeouts_.load());
  write_counter(out, "conveyor_http_refused_connections_total",
                "Connections refused at accept: too many open, in all or from one address.",
                refused_.load());
  return out;
}

// -- server state --------------------------------------------------------------------------------

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

server_state::server_state(server_options opts, completion_backend& be)
    : options(std::move(opts)),
      backend(be),
      model(be.model_name()),
      created_at(unix_now()),
      control(net::make_strand(io)),
      acceptor(control),
      drain_timer(control),
      accept_retry(control),
      refusal_log_timer(control) {}

void server_state::add_connection(const std::shared_ptr<connection>& conn,
                                  const std::string& address, bool counted) {
  std::lock_guard<std::mutex> lock{registry_mutex};
  connections.emplace(conn.get(), registered_connection{conn, address, counted});
  if (!counted) return;
  per_address[address] += 1;
  counted_connections += 1;
}

void server_state::remove_connection(const connection* conn) {
  {
    std::lock_guard<std::mutex> lock{registry_mutex};
    auto it = connections.find(conn);
    if (it != connections.end()) {
      if (it->second.counted) {
        auto count = per_address.find(it->second.address);
        if (count != per_address.end() && --count->second == 0) per_address.erase(count);
        counted_connections -= 1;
      }
      connections.erase(it);
    }
  }
  registry_cv.notify_all();
}

std::size_t server_state::connections_from(const std::string& address) {
  std::lock_guard<std::mutex> lock{registry_mutex};
  auto it = per_address.find(address);
  return it == per_address.end() ? 0 : it->second;
}

std::size_t server_state::connection_count() {
  std::lock_guard<std::mutex> lock{registry_mutex};
  return counted_connections;
}

std::vector<std::shared_ptr<connection>> server_state::live_connections() {
  // Copied out: the last reference to a connection may go here, and its destructor
  // unregisters it (under the registry's mutex).
  std::vector<std::shared_ptr<connection>> live;
  std::lock_guard<std::mutex> lock{registry_mutex};
  live.reserve(connections.size());
  for (auto& [ptr, entry] : connections)
    if (auto conn = entry.conn.lock()) live.push_back(std::move(conn));
  return live;
}

void server_state::shutdown_connections() {
  for (auto& conn : live_connections()) conn->shutdown();
}

void server_state::check_connection_deadlines() {
  for (auto& conn : live_connections()) conn->check_deadlines();
}

void server_state::job_ended() {
  auto left = running_jobs.fetch_sub(1) - 1;
  if (left == 0 && draining && !stopped) net::post(control, [this] { finish_drain(); });
}

void server_state::finish_drain() {
  if (drain_finished.exchange(true)) return;
  drain_timer.cancel();
  spdlog::info("drain complete: closing {} connections", connection_count());
  shutdown_connections();
  {
    std::lock_guard<std::mutex> lock{wait_mutex};
    wake_waiters = true;
  }
  wait_cv.notify_all();
}

std::string server_state::metrics_text() {
  return counters.render(connection_count(), running_jobs.load());
}

namespace {

// "refusing a connection ..." with its count when several were held back.
void write_refusal_line(const server_state& st, refusal why, const std::string& address,
                        const log_limiter::line& line) {
  std::string repeats;
  if (line.count > 1)
    repeats = fmt::format(
        " (x{} in the last {} s)", line.count,
        std::chrono::duration_cast<std::chrono::seconds>(line.span).count());
  if (why == refusal::server_full)
    spdlog::warn("refusing a connection: {} connections are open{}", st.options.max_connections,
                 repeats);
  else
    spdlog::warn("refusing a connection from {}: {} connections from one address are open{}",
                 address, st.options.max_connections_per_address, repeats);
}

// Flushes the counts held back once the interval passed; on `control`.
void flush_refusal_logs(server_state& st) {
  auto now = log_limiter::clock::now();
  if (auto line = st.refused_full_log.flush(now))
    write_refusal_line(st, refusal::server_full, "", *line);
  if (auto line = st.refused_address_log.flush(now))
    write_refusal_line(st, refusal::address_full, st.last_refused_address, *line);
}

// Writes (or holds back and counts) one refusal's warning; on `control`.
void log_refusal(server_state& st, refusal why, const std::string& address) {
  auto& limiter = why == refusal::server_full ? st.refused_full_log : st.refused_address_log;
  if (why == refusal::address_full) st.last_refused_address = address;
  if (auto line = limiter.note(log_limiter::clock::now())) {
    write_refusal_line(st, why, address, *line);
    return;
  }
  if (st.refusal_log_timer_armed) return;
  // Report the end of the burst one interval later.
  st.refusal_log_timer_armed = true;
  st.refusal_log_timer.expires_after(st.options.log_repeat_interval);
  st.refusal_log_timer.async_wait([&st](boost::system::error_code ec) {
    st.refusal_log_timer_armed = false;
    if (!ec) flush_refusal_logs(st);
  });
}

// Accepts connections one after another, on `control`.
void accept_next(server_state& st) {
  st.acceptor.async_accept(net::make_strand(st.io), [&st](boost::system::error_code ec,
                                                          tcp::socket socket) {
    if (ec == net::error::operation_aborted || !st.acceptor.is_open()) return;
    if (ec) {
      // E.g. out of file descriptors: do not spin, try again shortly.
      spdlog::warn("accepting a connection failed: {}", ec.message());
      st.accept_retry.expires_after(std::chrono::milliseconds{100});
      st.accept_retry.async_wait([&st](boost::system::error_code wait_ec) {
        if (!wait_ec && st.acceptor.is_open()) accept_next(st);
      });
      return;
    }
    boost::system::error_code ignored;
    auto peer = socket.remote_endpoint(ignored);
    auto address = ignored ? std::string{"?"} : peer.address().to_string();
    auto why = refusal::none;
    if (st.connection_count() >= st.options.max_connections)
      why = refusal::server_full;
    else if (st.connections_from(address) >= st.options.max_connections_per_address)
      why = refusal::address_full;
    if (why != refusal::none) {
      st.counters.count_refused();
      log_refusal(st, why, address);
    }
    socket.set_option(tcp::no_delay{true}, ignored);
    start_connection(st, std::move(socket), address, why);
    accept_next(st);
  });
}

// Closes the listening socket and stops the timers; on `control`.
void close_acceptor(server_state& st) {
  boost::system::error_code ignored;
  st.acceptor.close(ignored);
  st.accept_retry.cancel();
  st.refusal_log_timer.cancel();
}

std::string url_host(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

}  // namespace

}  // namespace detail

// -- http_server ---------------------------------------------------------------------------------

http_server::http_server(server_options options, completion_backend& backend)
    : state_(std::make_unique<detail::server_state>(std::move(options), backend)) {}

http_server::~http_server() {
  stop();
  // Destroying the state destroys the io_context (and the connections its handlers hold).
}

std::error_code http_server::start() {
  auto& st = *state_;
  std::lock_guard<std::mutex> lock{st.lifecycle_mutex};
  if (st.started || st.stopped) return std::make_error_code(std::errc::operation_not_permitted);
  const auto& opts = st.options;
  auto fail = [&](const char* what, const boost::system::error_code& ec) {
    spdlog::error("cannot listen on http://{}:{}: {} failed: {}", detail::url_host(opts.host),
                  opts.port, what, ec.message());
    boost::system::error_code ignored;
    st.acceptor.close(ignored);
    return static_cast<std::error_code>(ec);
  };
  boost::system::error_code ec;
  detail::tcp::resolver resolver{st.io};
  auto endpoints =
      resolver.resolve(opts.host, std::to_string(opts.port), detail::tcp::resolver::passive, ec);
  if (ec) return fail("resolving the host", ec);
  if (endpoints.empty())
    return fail("resolving the host", make_error_code(boost::asio::error::host_not_found));
  auto endpoint = endpoints.begin()->endpoint();
  st.acceptor.open(endpoint.protocol(), ec);
  if (ec) return fail("opening the socket", ec);
  st.acceptor.set_option(detail::tcp::acceptor::reuse_address(true), ec);
  if (ec) return fail("setting SO_REUSEADDR", ec);
  st.acceptor.bind(endpoint, ec);
  if (ec) return fail("binding", ec);
  st.acceptor.listen(detail::net::socket_base::max_listen_connections, ec);
  if (ec) return fail("listening", ec);
  st.bound_port = st.acceptor.local_endpoint().port();
  st.started = true;
  // spdlog's registry (and its default logger) is made on first use, inside libspdlog; made
  // here, before any I/O thread exists, the threads' first log lines find it made. (Made by
  // whichever thread logs first, its thread-safe static would be correct too, but invisible to
  // ThreadSanitizer, which sees neither that library's guard nor its atomics.)
  spdlog::default_logger_raw();
  st.work.emplace(st.io.get_executor());
  detail::net::post(st.control, [&st] { detail::accept_next(st); });
  auto threads = std::max<int32_t>(1, opts.io_threads);
  for (int32_t i = 0; i < threads; ++i) {
    st.threads.emplace_back([&st] {
      for (;;) {
        try {
          st.io.run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("unexpected exception on an HTTP I/O thread: {}", e.what());
        }
      }
    });
  }
  spdlog::info("listening on http://{}:{}", detail::url_host(opts.host), st.bound_port.load());
  return {};
}

uint16_t http_server::port() const {
  return state_->bound_port.load();
}

void http_server::set_ready(bool ready) {
  state_->ready = ready;
}

void http_server::advance_deadline_clock(std::chrono::milliseconds by) {
  auto& st = *state_;
  st.deadline_clock_offset_ns +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::max(by, by.zero())).count();
  st.check_connection_deadlines();
}

void http_server::begin_drain() {
  auto& st = *state_;
  std::lock_guard<std::mutex> lock{st.lifecycle_mutex};
  if (!st.started || st.stopped || st.draining.exchange(true)) return;
  spdlog::info("draining: no new connections; {} completions running, waiting up to {} ms",
               st.running_jobs.load(), st.options.drain_timeout.count());
  detail::net::post(st.control, [&st] {
    detail::close_acceptor(st);
    st.drain_timer.expires_after(st.options.drain_timeout);
    st.drain_timer.async_wait([&st](boost::system::error_code ec) {
      if (ec || st.drain_finished) return;
      spdlog::warn("drain timeout: cancelling {} running completions", st.running_jobs.load());
      // Each running completion ends with shutting_down; the last one finishes the drain.
      st.shutdown_connections();
      if (st.running_jobs == 0) st.finish_drain();
    });
    if (st.running_jobs == 0) st.finish_drain();
  });
}

void http_server::wait() {
  auto& st = *state_;
  {
    std::unique_lock<std::mutex> lock{st.wait_mutex};
    st.wait_cv.wait(lock, [&] { return st.wake_waiters || !st.started; });
  }
  stop();
}

void http_server::stop() {
  auto& st = *state_;
  std::lock_guard<std::mutex> lock{st.lifecycle_mutex};
  if (st.stopped) return;
  if (st.started) {
    st.draining = true;
    detail::net::post(st.control, [&st] {
      detail::close_acceptor(st);
      st.drain_timer.cancel();
    });
    // Running completions end with shutting_down; give connections a moment to flush that.
    st.shutdown_connections();
    {
      std::unique_lock<std::mutex> registry_lock{st.registry_mutex};
      st.registry_cv.wait_for(registry_lock, std::chrono::seconds{2},
                              [&] { return st.connections.empty(); });
    }
  }
  st.stopped = true;
  st.work.reset();
  st.io.stop();
  for (auto& t : st.threads) t.join();
  st.threads.clear();
  {
    // From now on, late backend events are dropped instead of posted.
    std::lock_guard<std::mutex> gate_lock{st.gate->mutex};
    st.gate->open = false;
  }
  {
    std::lock_guard<std::mutex> wait_lock{st.wait_mutex};
    st.wake_waiters = true;
  }
  st.wait_cv.notify_all();
  if (st.started) spdlog::info("HTTP server stopped");
}

}  // namespace conveyor::server
