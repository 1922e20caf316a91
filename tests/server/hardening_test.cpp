// The server against hostile or careless clients, over real sockets with the fake backend: a
// request head that does not arrive in time (whole, not per line), connections per client
// address, rate-limited refusal warnings, a timeout too large for the deadline, and requests
// for a model that is not served. No elapsed-time assertions: deadlines of an hour that pass
// when the test moves the server's deadline clock (or short ones whose passing the test only
// waits for), and the tests wait for the event (an answer, a closed connection).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "chat/chat_template.hpp"
#include "common/error.hpp"
#include "fake_backend.hpp"
#include "server/http_server.hpp"
#include "server/log_limiter.hpp"
#include "test_client.hpp"

namespace conveyor::server::test {

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class hardening_test : public ::testing::Test {
 protected:
  void start(server_options opts = {}) {
    opts.host = "127.0.0.1";
    opts.port = 0;
    server = std::make_unique<http_server>(opts, backend);
    ASSERT_FALSE(server->start());
    server->set_ready(true);
    port = server->port();
    ASSERT_NE(port, 0);
  }

  // Declared before the server, so destroyed after it.
  fake_backend backend;
  std::unique_ptr<http_server> server;
  uint16_t port = 0;
};

void expect_error(const std::optional<http_reply>& reply, unsigned status, const std::string& type,
                  const json& param, const std::string& code) {
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, status) << reply->body;
  auto j = reply->json();
  EXPECT_EQ(j["error"]["type"], type) << reply->body;
  EXPECT_EQ(j["error"]["param"], param) << reply->body;
  EXPECT_EQ(j["error"]["code"], code) << reply->body;
}

// Deadlines that never fire during a test: what closes a connection is the head deadline.
server_options slow_idle(std::chrono::milliseconds header_timeout) {
  server_options opts;
  opts.idle_timeout = std::chrono::hours{1};
  opts.header_timeout = header_timeout;
  return opts;
}

// Deadlines that pass only when the test moves the deadline clock (an hour for the head, ten for
// the idle wait), on one I/O thread, so that `barrier` orders the server's work.
server_options test_clock_deadlines() {
  server_options opts;
  opts.io_threads = 1;
  opts.header_timeout = std::chrono::hours{1};
  opts.idle_timeout = std::chrono::hours{10};
  return opts;
}

// A raw TCP connection to 127.0.0.1:port from the local address `from` (any 127.x.y.z works on
// Linux's loopback), so that the server sees another client address.
int connect_from(const char* from, uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, from, &local.sin_addr);
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends a GET /health on `fd` and reads until the server closes or the answer's status line is
// in; returns what was read.
std::string health_from(int fd) {
  std::string request = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != ssize_t(request.size()))
    return "";
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string got;
  char buf[4096];
  for (;;) {
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, std::size_t(n));
  }
  return got;
}

// A whole request on a new connection. On a server with one I/O thread its answer comes after
// everything the server had to do before: connections made earlier are accepted (the kernel's
// accept queue is first come, first served) and started, the bytes that reached the server
// earlier are read, and the deadline checks that `advance_deadline_clock` posted have run.
void barrier(uint16_t port) {
  auto reply = test_client{port}.request("GET", "/health");
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->status, 200u);
}

}  // namespace

// -- the request head's deadline -----------------------------------------------------------------

TEST_F(hardening_test, a_head_that_stops_halfway_gets_408_and_is_closed) {
  start(slow_idle(200ms));
  test_client c{port};
  ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"));
  auto reply = c.read_response(30s);
  expect_error(reply, 408, "invalid_request_error", nullptr, "request_timeout");
  EXPECT_EQ(reply->header("connection"), "close");
  EXPECT_TRUE(c.wait_closed(30s));
  EXPECT_EQ(backend.submitted(), 0);
}

TEST_F(hardening_test, the_whole_head_is_due_at_once_not_each_line) {
  // A slowloris: header lines far apart, each well within the deadline of the line before it.
  // Counted per line, the head would never be late; counted as a whole, it is, and the server
  // answers 408. The time between lines passes on the server's deadline clock, moved by the
  // test, so the outcome is the same on any machine.
  start(test_clock_deadlines());
  test_client c{port};
  ASSERT_TRUE(c.send("GET /health HTTP/1.1\r\nHost: x\r\n"));
  barrier(port);  // the connection is served: its head is due an hour from now
  // 59 minutes: the head is not late yet.
  server->advance_deadline_clock(59min);
  ASSERT_TRUE(c.send("X-Trickle: 1\r\n"));
  barrier(port);  // the deadline check and the new line are behind the server
  EXPECT_FALSE(c.wait_closed(10ms)) << "closed before the head's deadline: " << c.raw();
  EXPECT_EQ(c.raw(), "");
  // Two more minutes: the last line came two minutes ago, the head's first 61 minutes ago.
  server->advance_deadline_clock(2min);
  auto reply = c.read_response(30s);
  ASSERT_TRUE(reply) << "no answer to a head 61 minutes late: " << c.error();
  expect_error(reply, 408, "invalid_request_error", nullptr, "request_timeout");
  EXPECT_EQ(reply->json()["error"]["message"],
            "the request line and headers did not arrive within 3600000 ms");
  EXPECT_TRUE(c.wait_closed(30s));
  EXPECT_EQ(backend.submitted(), 0);
}

TEST_F(hardening_test, a_client_that_sends_nothing_is_closed_without_an_answer) {
  start(slow_idle(200ms));
  test_client c{port};
  EXPECT_TRUE(c.wait_closed(30s));
  EXPECT_EQ(c.raw(), "");
  auto reply = test_client{port}.request("GET", "/metrics");
  ASSERT_TRUE(reply);
  EXPECT_NE(reply->body.find("conveyor_http_request_head_timeouts_total 1\n"), std::string::npos)
      << reply->body;
}

TEST_F(hardening_test, a_kept_alive_connection_waits_idle_then_its_next_head_is_due) {
  start(test_clock_deadlines());
  test_client c{port};
  auto first = c.request("GET", "/health");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200u);
  barrier(port);  // the connection waits for its next request
  // Waiting for the next request is idle time (ten hours), not the head's deadline (one).
  server->advance_deadline_clock(2h);
  barrier(port);
  EXPECT_FALSE(c.wait_closed(10ms))
      << "an idle keep-alive connection was closed by the head deadline";
  auto second = c.request("GET", "/health");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 200u);
  // Once a request starts, its head is due within the deadline.
  ASSERT_TRUE(c.send("GET /health HTTP/1.1\r\n"));
  barrier(port);
  server->advance_deadline_clock(61min);
  expect_error(c.read_response(30s), 408, "invalid_request_error", nullptr, "request_timeout");
  EXPECT_TRUE(c.wait_closed(30s));
}

TEST_F(hardening_test, a_connection_idle_past_its_timeout_is_closed_without_an_answer) {
  start(test_clock_deadlines());
  test_client c{port};
  auto first = c.request("GET", "/health");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200u);
  barrier(port);  // the connection waits for its next request: idle ten hours from now
  server->advance_deadline_clock(9h);
  barrier(port);
  EXPECT_FALSE(c.wait_closed(10ms)) << "closed before its idle timeout";
  server->advance_deadline_clock(2h);
  EXPECT_TRUE(c.wait_closed(30s));
  EXPECT_EQ(c.raw(), "");
}

// -- connections per address ---------------------------------------------------------------------

TEST_F(hardening_test, connections_from_one_address_beyond_the_limit_get_429) {
  server_options opts;
  opts.max_connections_per_address = 2;
  start(opts);
  test_client a{port}, b{port};
  ASSERT_TRUE(a.request("GET", "/health"));
  ASSERT_TRUE(b.request("GET", "/health"));
  test_client c{port};
  auto reply = c.read_response();
  expect_error(reply, 429, "rate_limit_error", nullptr, "too_many_connections_per_address");
  EXPECT_EQ(reply->header("retry-after"), "1");
  EXPECT_TRUE(c.wait_closed());

  // Another address is served while this one is full.
  int other = connect_from("127.0.0.2", port);
  ASSERT_GE(other, 0) << "cannot connect from 127.0.0.2";
  auto answer = health_from(other);
  ::close(other);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;

  // A closed connection frees its place.
  a.close();
  ASSERT_TRUE(fake_backend::eventually([&] {
    test_client d{port};
    auto r = d.request("GET", "/health");
    return r && r->status == 200;
  }));
}

TEST_F(hardening_test, refused_connections_count_toward_no_limit) {
  // Found by tools/reliability (hostile): refused connections, while they answered and lingered,
  // counted toward max_connections, so a burst of refusals from one address refused others.
  server_options opts;
  opts.max_connections = 3;
  opts.max_connections_per_address = 1;
  start(opts);
  test_client a{port};
  ASSERT_TRUE(a.request("GET", "/health"));
  std::vector<std::unique_ptr<test_client>> refused;
  for (int i = 0; i < 3; ++i) {
    refused.push_back(std::make_unique<test_client>(port));
    expect_error(refused.back()->read_response(), 429, "rate_limit_error", nullptr,
                 "too_many_connections_per_address");
  }
  // The three refused ones are still open on this side; two places remain for other addresses.
  for (const char* address : {"127.0.0.2", "127.0.0.3"}) {
    int other = connect_from(address, port);
    ASSERT_GE(other, 0) << "cannot connect from " << address;
    auto answer = health_from(other);
    ::close(other);
    EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << address << ": " << answer;
  }
}

TEST_F(hardening_test, a_burst_of_refusals_logs_one_line) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
  spdlog::default_logger()->sinks().push_back(sink);
  server_options opts;
  opts.max_connections = 1;
  opts.log_repeat_interval = std::chrono::hours{1};
  start(opts);
  test_client holder{port};
  ASSERT_TRUE(holder.request("GET", "/health"));
  for (int i = 0; i < 20; ++i) {
    test_client refused{port};
    expect_error(refused.read_response(), 503, "server_error", nullptr, "too_many_connections");
    EXPECT_TRUE(refused.wait_closed());
  }
  spdlog::default_logger()->sinks().pop_back();
  int lines = 0;
  for (const auto& line : sink->last_formatted())
    if (line.find("refusing a connection") != std::string::npos) ++lines;
  EXPECT_EQ(lines, 1);
  auto metrics = holder.request("GET", "/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("conveyor_http_refused_connections_total 20\n"), std::string::npos)
      << metrics->body;
}

TEST(log_limiter, one_line_per_interval_with_the_count_held_back) {
  using clock = detail::log_limiter::clock;
  detail::log_limiter limiter{10s};
  const clock::time_point t0{};
  auto first = limiter.note(t0);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->count, 1u);
  EXPECT_EQ(first->span, clock::duration{});
  for (int i = 1; i <= 1233; ++i) EXPECT_FALSE(limiter.note(t0 + i * 1ms));
  EXPECT_EQ(limiter.held_back(), 1233u);
  EXPECT_FALSE(limiter.flush(t0 + 9s)) << "the interval has not passed";
  // The next occurrence after the interval reports itself and the ones held back.
  auto next = limiter.note(t0 + 10s);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->count, 1234u);
  EXPECT_EQ(next->span, 10s);
  EXPECT_EQ(limiter.held_back(), 0u);
  // The end of a burst is reported by flush once the interval passed.
  EXPECT_FALSE(limiter.note(t0 + 11s));
  EXPECT_FALSE(limiter.note(t0 + 12s));
  EXPECT_FALSE(limiter.flush(t0 + 19s));
  auto tail = limiter.flush(t0 + 20s);
  ASSERT_TRUE(tail);
  EXPECT_EQ(tail->count, 2u);
  EXPECT_EQ(tail->span, 10s);
  EXPECT_FALSE(limiter.flush(t0 + 40s)) << "nothing held back";
}

// -- timeout overflow ----------------------------------------------------------------------------

TEST_F(hardening_test, a_timeout_beyond_a_year_is_400_naming_timeout) {
  start();
  test_client c{port};
  auto reply = c.request("POST", "/v1/completions", R"({"prompt": "a b", "timeout": 1e10})");
  expect_error(reply, 400, "invalid_request_error", "timeout", "bad_request");
  EXPECT_EQ(reply->json()["error"]["message"],
            "'timeout' must be at most 31536000 seconds (a year), got 10000000000.0");
  EXPECT_EQ(backend.submitted(), 0);
  // A year itself is fine and reaches the backend as given.
  auto ok = test_client{port}.request("POST", "/v1/completions",
                                      R"({"prompt": "a b", "timeout": 31536000})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200u) << ok->body;
  ASSERT_EQ(backend.submitted(), 1);
  EXPECT_EQ(backend.requests().at(0).timeout_s, 31536000.0);
}

// -- the model field -----------------------------------------------------------------------------

TEST_F(hardening_test, a_model_that_is_not_served_is_404_model_not_found) {
  server_options opts;
  auto tmpl = chat::chat_template::parse(
      "{% for m in messages %}{{ m.content }} {% endfor %}", {"<s>", "</s>"});
  ASSERT_TRUE(tmpl) << message_of(tmpl.error());
  opts.chat_template = std::make_shared<const chat::chat_template>(*tmpl);
  start(opts);
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    auto body = std::string{path} == "/v1/completions"
                    ? R"({"model": "gpt-4", "prompt": "a b", "max_tokens": 2})"
                    : R"({"model": "gpt-4", "messages": [{"role": "user", "content": "a"}]})";
    auto reply = test_client{port}.request("POST", path, body);
    expect_error(reply, 404, "invalid_request_error", "model", "model_not_found");
    EXPECT_EQ(reply->json()["error"]["message"], "The model `gpt-4` does not exist") << path;
  }
  EXPECT_EQ(backend.submitted(), 0);
  // The served model (what /v1/models lists) and no model at all are both served.
  auto models = test_client{port}.request("GET", "/v1/models");
  ASSERT_TRUE(models);
  auto served = models->json()["data"][0]["id"].get<std::string>();
  EXPECT_EQ(served, "fake-model");
  auto named = test_client{port}.request(
      "POST", "/v1/completions", json{{"model", served}, {"prompt", "a b"}, {"max_tokens", 2}}.dump());
  ASSERT_TRUE(named);
  EXPECT_EQ(named->status, 200u) << named->body;
  auto unnamed =
      test_client{port}.request("POST", "/v1/completions", R"({"prompt": "a b", "max_tokens": 2})");
  ASSERT_TRUE(unnamed);
  EXPECT_EQ(unnamed->status, 200u) << unnamed->body;
  EXPECT_EQ(backend.submitted(), 2);
}

}  // namespace conveyor::server::test
