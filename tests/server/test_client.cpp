#include "test_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace conveyor::server::test {

namespace {

using steady = std::chrono::steady_clock;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return std::string{s};
}

}  // namespace

std::string http_reply::header(const std::string& lower_name) const {
  auto i = headers.find(lower_name);
  return i == headers.end() ? std::string{} : i->second;
}

nlohmann::json http_reply::json() const {
  return nlohmann::json::parse(body, nullptr, false);
}

test_client::test_client(uint16_t port, int rcvbuf) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return;
  if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

test_client::~test_client() {
  close();
}

void test_client::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool test_client::send(std::string_view bytes) {
  while (!bytes.empty() && fd_ >= 0) {
    auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return fd_ >= 0;
}

bool test_client::send_request(const std::string& method, const std::string& target,
                               const std::string& body, const std::string& extra,
                               const std::string& version) {
  std::string req = method + " " + target + " " + version + "\r\nHost: 127.0.0.1\r\n";
  if (!body.empty()) req += "Content-Type: application/json\r\n";
  if (!body.empty() || method == "POST")
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  req += extra + "\r\n" + body;
  return send(req);
}

bool test_client::fill(steady::time_point deadline) {
  if (fd_ < 0 || eof_) return false;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
  if (left.count() <= 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
  char chunk[16384];
  auto n = ::recv(fd_, chunk, sizeof(chunk), 0);
  if (n <= 0) {
    eof_ = true;
    return false;
  }
  buf_.append(chunk, static_cast<std::size_t>(n));
  return true;
}

std::optional<http_reply> test_client::read_response(std::chrono::milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  std::size_t head_end;
  while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos)
    if (!fill(deadline)) return std::nullopt;
  http_reply reply;
  std::string_view head{buf_.data(), head_end};
  auto line_end = head.find("\r\n");
  auto status_line = head.substr(0, line_end);
  auto sp = status_line.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  reply.status = static_cast<unsigned>(std::stoul(std::string{status_line.substr(sp + 1, 3)}));
  while (line_end != std::string_view::npos) {
    head.remove_prefix(line_end + 2);
    line_end = head.find("\r\n");
    auto line = head.substr(0, line_end);
    auto colon = line.find(':');
    if (colon != std::string_view::npos)
      reply.headers[lower(std::string{line.substr(0, colon)})] = trim(line.substr(colon + 1));
  }
  std::size_t pos = head_end + 4;
  if (reply.status < 200 || reply.status == 204 || reply.status == 304) {
    // No body.
  } else if (lower(reply.header("transfer-encoding")) == "chunked") {
    for (;;) {
      std::size_t eol;
      while ((eol = buf_.find("\r\n", pos)) == std::string::npos)
        if (!fill(deadline)) return std::nullopt;
      auto size = std::stoul(buf_.substr(pos, eol - pos), nullptr, 16);
      auto data = eol + 2;
      while (buf_.size() < data + size + 2)
        if (!fill(deadline)) return std::nullopt;
      reply.body.append(buf_, data, size);
      pos = data + size + 2;
      if (size == 0) break;
    }
  } else if (!reply.header("content-length").empty()) {
    auto size = std::stoul(reply.header("content-length"));
    while (buf_.size() < pos + size)
      if (!fill(deadline)) return std::nullopt;
    reply.body = buf_.substr(pos, size);
    pos += size;
  } else {
    // Close-delimited.
    while (fill(deadline)) {
    }
    if (!eof_) return std::nullopt;
    reply.body = buf_.substr(pos);
    pos = buf_.size();
  }
  buf_.erase(0, pos);
  return reply;
}

std::optional<http_reply> test_client::request(const std::string& method, const std::string& target,
                                               const std::string& body, const std::string& extra) {
  if (!send_request(method, target, body, extra)) return std::nullopt;
  return read_response();
}

bool test_client::read_until(std::string_view needle, std::chrono::milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  while (buf_.find(needle) == std::string::npos)
    if (!fill(deadline)) return false;
  return true;
}

bool test_client::wait_closed(std::chrono::milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  while (fill(deadline)) {
  }
  return eof_;
}

std::vector<nlohmann::json> sse_events(const std::string& body) {
  std::vector<nlohmann::json> events;
  std::size_t pos = 0;
  for (;;) {
    auto end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    auto event = body.substr(pos, end - pos);
    pos = end + 2;
    if (event.rfind("data: ", 0) != 0) continue;
    auto data = event.substr(6);
    if (data == "[DONE]")
      events.emplace_back("[DONE]");
    else
      events.push_back(nlohmann::json::parse(data, nullptr, false));
  }
  return events;
}

std::string run_command(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return out;
  char chunk[4096];
  while (auto n = std::fread(chunk, 1, sizeof(chunk), pipe)) out.append(chunk, n);
  ::pclose(pipe);
  return out;
}

}  // namespace conveyor::server::test
