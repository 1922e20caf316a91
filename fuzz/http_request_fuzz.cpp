// Fuzz target: raw bytes into the HTTP server, over a real loopback socket, as a client would
// send them (any method, target, headers, framing, pipelining, body). The server runs once per
// process on a backend that answers at once; each input is written on a new connection whose
// sending side is then shut, and the server must answer or close it without crashing, and keep
// answering /health after it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "server/http_server.hpp"

namespace {

using namespace conveyor::server;

/// Answers every request with its prompt's length in words, as two pieces of text.
class instant_backend : public completion_backend {
 public:
  std::shared_ptr<request_handle> submit(completion_request req,
                                         completion_events events) override {
    struct handle : request_handle {
      void cancel() override {}
    };
    // Log-probabilities when asked for: the prompt's (echo) and the texts', with
    // an excluded alternative and the NaN of a prompt's first token.
    completion_step first;
    if (req.params.prompt_logprobs)
      first.prompt_logprobs = {{"", std::numeric_limits<float>::quiet_NaN(), {}},
                               {req.prompt.substr(0, 3), -1.0f, {{"x", -0.5f}}}};
    if (req.params.logprobs >= 0)
      first.logprobs = {{"Once", -0.25f, {{"Once", -0.25f}, {"One", -1.5f}}},
                        {" upon", -0.125f, {{" upon", -0.125f}, {"\xC3", -INFINITY}}}};
    first.text = "Once upon";
    events.on_step(std::move(first));
    completion_step last;
    last.text = " a time" + std::string(req.prompt.size() % 3, '!');
    last.end = completion_step::end_kind::finished;
    last.finish_reason = "length";
    last.usage = completion_usage{int32_t(req.prompt.size()), 2};
    events.on_step(std::move(last));
    return std::make_shared<handle>();
  }
  std::string model_name() const override { return "stories260K"; }
  void collect_metrics(std::function<void(std::string)> reply) override { reply("up 1\n"); }
  // A byte tokenizer (id = byte + 3, BOS 1) of 259 ids, so that /tokenize, /detokenize and the
  // token-id checks run too.
  completion_defaults defaults() const override {
    completion_defaults d;
    d.vocab_size = 259;
    return d;
  }
  bool has_tokenizer() const override { return true; }
  conveyor::expected<std::vector<int32_t>> tokenize(const std::string& text,
                                                    bool add_bos) const override {
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(1);
    for (unsigned char c : text) ids.push_back(int32_t(c) + 3);
    return ids;
  }
  std::string detokenize(const std::vector<int32_t>& ids) const override {
    std::string text;
    for (auto id : ids)
      if (id >= 3 && id < 259) text += char(id - 3);
    return text;
  }
  int32_t max_model_len() const override { return 512; }
};

/// Writes `bytes` to a new connection, shuts its sending side, and reads until the server
/// closes it (or 5 s pass: a connection the server keeps after its input ended is a finding).
/// Returns what came back.
std::string exchange(uint16_t port, const char* bytes, size_t size) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) std::abort();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // The client side closes with a reset (linger 0), so that tens of thousands of runs leave no
  // TIME_WAIT behind them to exhaust the ephemeral ports (connect would fail: not a finding).
  linger no_wait{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &no_wait, sizeof no_wait);
  // libFuzzer's timer signal may interrupt connect; the connection then goes on in the
  // background, and asking again says so (EALREADY) until it is made (EISCONN).
  while (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno == EISCONN) break;
    if (errno == EINTR || errno == EALREADY) continue;
    std::perror("http_request_fuzz: connect to the server under test");
    std::abort();
  }
  for (size_t sent = 0; sent < size;) {
    auto n = ::send(fd, bytes + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close early (a bad head); that is an answer too
    sent += size_t(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string reply;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, 5000);
    if (ready == 0) {
      std::fprintf(stderr, "the server kept a connection open 5 s after its input ended\n");
      std::abort();
    }
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    reply.append(buf, size_t(n));
  }
  ::close(fd);
  return reply;
}

struct fixture {
  instant_backend backend;
  std::unique_ptr<http_server> server;
  fixture() {
    spdlog::set_level(spdlog::level::off);
    server_options opts;
    opts.port = 0;
    opts.max_body_bytes = 4096;
    opts.max_header_bytes = 2048;
    opts.header_timeout = std::chrono::seconds{2};
    opts.idle_timeout = std::chrono::seconds{2};
    server = std::make_unique<http_server>(opts, backend);
    if (server->start()) std::abort();
    server->set_ready(true);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fixture f;
  auto reply = exchange(f.server->port(), reinterpret_cast<const char*>(data), size);
  // Whatever came back is HTTP or nothing at all.
  if (!reply.empty() && reply.rfind("HTTP/1.", 0) != 0) {
    std::fprintf(stderr, "a reply that is not HTTP: %.80s\n", reply.c_str());
    std::abort();
  }
  static const char health[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  auto after = exchange(f.server->port(), health, sizeof health - 1);
  if (after.rfind("HTTP/1.1 200 OK\r\n", 0) != 0) {
    std::fprintf(stderr, "/health after the input: %.80s\n", after.c_str());
    std::abort();
  }
  return 0;
}
