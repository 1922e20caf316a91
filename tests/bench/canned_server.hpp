// A small HTTP server on a real socket for the --target client's tests: answers each
// POST with a canned SSE stream of 3 tokens (written at once), the same stream chunked and
// written a byte at a time for prompts "chunked", or 429 for prompts "full", and keeps every
// request body it was sent. A POST to /v1/chat/completions gets a chat stream whose reply is
// "Reply #N", N the request's place among the bodies (0 first), with usage prompt_tokens 100
// and prompt_tokens_details.cached_tokens 40; or 400 when a user message is "refuse".
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace conveyor::bench::test {

/// Listens on 127.0.0.1 (a free port) from construction to destruction.
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

  canned_server(const canned_server&) = delete;
  canned_server& operator=(const canned_server&) = delete;

  uint16_t port() const { return port_; }

  /// "http://127.0.0.1:PORT".
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// The bodies of the requests received so far, in arrival order; each is stored before its
  /// response is written.
  std::vector<std::string> bodies() const {
    std::lock_guard<std::mutex> guard{mutex_};
    return bodies_;
  }

 private:
  void serve() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      sessions_.emplace_back([this, c] { session(c); });
    }
  }

  static std::string hex(std::size_t n) {
    char out[32];
    std::snprintf(out, sizeof(out), "%zx", n);
    return out;
  }

  static void write_all(int c, const std::string& s) {
    std::size_t done = 0;
    while (done < s.size()) {
      auto n = ::write(c, s.data() + done, s.size() - done);
      if (n <= 0) return;
      done += std::size_t(n);
    }
  }

  void session(int c) {
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
    std::size_t place = 0;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      place = bodies_.size();
      bodies_.push_back(in.size() >= head_end ? in.substr(head_end) : std::string{});
    }
    if (in.compare(0, 30, "POST /v1/chat/completions HTTP") == 0 &&
        in.find("\"content\":\"refuse\"") != std::string::npos) {
      const std::string body = R"({"error":{"message":"refused","type":"invalid_request_error"}})";
      write_all(c,
                "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                "Content-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body);
    } else if (in.compare(0, 30, "POST /v1/chat/completions HTTP") == 0) {
      write_all(c,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n");
      const std::string tail = R"(,"object":"chat.completion.chunk"})";
      write_all(c, std::string{"data: {\"choices\":[{\"delta\":{\"content\":\"\",\"role\":"
                               "\"assistant\"},\"finish_reason\":null,\"index\":0}]"} +
                       tail + "\n\n");
      for (const std::string& word :
           {std::string{"Reply"}, std::string{" #"}, std::to_string(place)})
        write_all(c, "data: {\"choices\":[{\"delta\":{\"content\":\"" + word +
                         "\"},\"finish_reason\":null,\"index\":0}]" + tail + "\n\n");
      write_all(c,
                "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\","
                "\"index\":0}]" +
                    tail + "\n\n");
      write_all(c,
                "data: {\"choices\":[],\"usage\":{\"completion_tokens\":3,\"prompt_tokens\":100,"
                "\"prompt_tokens_details\":{\"cached_tokens\":40}}}\n\ndata: [DONE]\n\n");
    } else if (in.find("\"prompt\":\"full\"") != std::string::npos) {
      const std::string body = R"({"error":{"message":"full","type":"rate_limit_error"}})";
      write_all(c,
                "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
                "Content-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body);
    } else if (in.find("\"prompt\":\"chunked\"") != std::string::npos) {
      // The same stream in chunked transfer coding, one byte per write, so that the client
      // reads chunk sizes and events cut anywhere.
      std::string body;
      for (const char* word : {"Once", " upon", " a"}) {
        const std::string event = std::string{"data: {\"choices\":[{\"text\":\""} + word +
                                  "\",\"finish_reason\":null}]}\n\n";
        body += hex(event.size()) + "\r\n" + event + "\r\n";
      }
      const std::string last =
          "data: {\"choices\":[],\"usage\":{\"completion_tokens\":3}}\n\ndata: [DONE]\n\n";
      body += hex(last.size()) + "\r\n" + last + "\r\n0\r\n\r\n";
      const std::string response =
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
          "Transfer-Encoding: chunked\r\n\r\n" +
          body;
      for (char ch : response) write_all(c, std::string(1, ch));
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
  mutable std::mutex mutex_;
  std::vector<std::string> bodies_;
};

}  // namespace conveyor::bench::test
