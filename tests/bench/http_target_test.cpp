// The --target client: URL parsing, stream interpretation, and a replay against a
// small canned server on a real socket.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bench/http_target.hpp"

using namespace conveyor::bench;

TEST(bench_http, parse_target_url) {
  auto u = parse_target_url("http://127.0.0.1:8080");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "8080");
  EXPECT_EQ(u->prefix, "");
  u = parse_target_url("http://example.org/api/");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->prefix, "/api");
  EXPECT_FALSE(parse_target_url("https://x:1"));
  EXPECT_FALSE(parse_target_url("http://x:port"));
  EXPECT_FALSE(parse_target_url("http://:80"));
}

TEST(bench_http, completion_stream_outcomes) {
  completion_stream ok;
  ok.on_data(R"({"choices":[{"text":"Once","finish_reason":null}]})", 0.1);
  ok.on_data(R"({"choices":[{"text":"","finish_reason":null}]})", 0.15);
  ok.on_data(R"({"choices":[{"text":" upon","finish_reason":"length"}]})", 0.2);
  ok.on_data(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}})", 0.21);
  ok.on_data("[DONE]", 0.22);
  auto r = ok.finish(200, "", 0.25);
  EXPECT_EQ(r.status, request_status::completed);
  EXPECT_EQ(r.chunk_times, (std::vector<double>{0.1, 0.2}));  // the empty chunk is no token
  EXPECT_EQ(r.output_tokens, 2);
  EXPECT_DOUBLE_EQ(r.end, 0.25);

  completion_stream full;
  auto q = full.finish(429, "", 0.01);
  EXPECT_EQ(q.status, request_status::rejected);
  completion_stream err;
  err.on_data(R"({"error":{"message":"queue full","type":"rate_limit_error"}})", 0.1);
  EXPECT_EQ(err.finish(200, "", 0.1).status, request_status::rejected);
  completion_stream lost;
  lost.on_data(R"({"error":{"message":"executor lost","type":"server_error"}})", 0.1);
  EXPECT_EQ(lost.finish(200, "", 0.1).status, request_status::failed);
  completion_stream cut;
  cut.on_data(R"({"choices":[{"text":"a"}]})", 0.1);
  EXPECT_EQ(cut.finish(200, "end of stream", 0.2).status, request_status::failed);
  EXPECT_EQ(completion_stream{}.finish(500, "", 0.1).status, request_status::failed);
}

namespace {

/// Answers each connection with a canned SSE stream (3 tokens, written at once), or 429 for
/// prompts "full".
class canned_server {
 public:
  canned_server() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(fd_, 64);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }

  ~canned_server() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    for (auto& t : sessions_) t.join();
  }

  uint16_t port() const { return port_; }

 private:
  void serve() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      sessions_.emplace_back([c] { session(c); });
    }
  }

  static void write_all(int c, const std::string& s) {
    std::size_t done = 0;
    while (done < s.size()) {
      auto n = ::write(c, s.data() + done, s.size() - done);
      if (n <= 0) return;
      done += std::size_t(n);
    }
  }

  static void session(int c) {
    std::string in;
    char buf[4096];
    // Headers, then the body (Content-Length).
    while (in.find("\r\n\r\n") == std::string::npos) {
      auto n = ::read(c, buf, sizeof(buf));
      if (n <= 0) break;
      in.append(buf, std::size_t(n));
    }
    const auto cl = in.find("Content-Length: ");
    const auto head_end = in.find("\r\n\r\n") + 4;
    const std::size_t length = cl == std::string::npos ? 0 : std::stoul(in.substr(cl + 16));
    while (in.size() < head_end + length) {
      auto n = ::read(c, buf, sizeof(buf));
      if (n <= 0) break;
      in.append(buf, std::size_t(n));
    }
    if (in.find("\"prompt\":\"full\"") != std::string::npos) {
      const std::string body = R"({"error":{"message":"full","type":"rate_limit_error"}})";
      write_all(c,
                "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
                "Content-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body);
    } else {
      write_all(c,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n");
      for (const char* word : {"Once", " upon", " a"}) {
        write_all(c, std::string{"data: {\"choices\":[{\"text\":\""} + word +
                         "\",\"finish_reason\":null}]}\n\n");
      }
      write_all(c,
                "data: {\"choices\":[],\"usage\":{\"completion_tokens\":3}}\n\ndata: [DONE]\n\n");
    }
    ::shutdown(c, SHUT_WR);
    ::close(c);
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::thread> sessions_;
};

}  // namespace

TEST(bench_http, replays_a_workload_in_open_loop) {
  canned_server server;
  workload w;
  for (int i = 0; i < 12; ++i)
    w.push_back({"r" + std::to_string(i), 0.01 * i, i == 5 ? "full" : "Once", 3});
  target_options o;
  o.url = *parse_target_url("http://127.0.0.1:" + std::to_string(server.port()));
  run_progress progress;
  double wall_s = 0;
  auto records = run_target(w, o, progress, wall_s);
  ASSERT_EQ(records.size(), w.size());
  EXPECT_EQ(progress.sent.load(), w.size());
  EXPECT_EQ(progress.ended.load(), w.size());
  auto s = summarize("target", 100, records, wall_s);
  EXPECT_EQ(s.completed, 11u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.failed, 0u);
  EXPECT_EQ(s.output_tokens, 33u);
  EXPECT_EQ(s.itl.count, 22u);
  // Open loop: the last request starts 0.11 s after the first, however fast the server answers.
  EXPECT_GE(wall_s, 0.11);
  // Each chunk is stamped once, in order, after its request's start and not after its end
  // (how chunk times become ITL is completion_stream_outcomes' business, with exact times).
  for (const auto& r : records) {
    if (r.status != request_status::completed) continue;
    ASSERT_EQ(r.chunk_times.size(), 3u);
    EXPECT_GE(r.chunk_times.front(), 0.0);
    EXPECT_TRUE(std::is_sorted(r.chunk_times.begin(), r.chunk_times.end()));
    EXPECT_LE(r.chunk_times.back(), r.end);
  }
}
