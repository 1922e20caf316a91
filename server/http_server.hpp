// The HTTP front door: an OpenAI-style completion server on Boost.Asio/Beast threads that feeds a
// `completion_backend` and never lets an actor wait on a socket.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>

#include "chat/template_source.hpp"
#include "config/config.hpp"
#include "server/backend.hpp"

namespace conveyor::server {

namespace detail {
struct server_state;
}  // namespace detail

/// Settings of the HTTP server; the defaults are those of the configuration's `[server]`
/// (config::server, the one place they are written).
struct server_options {
  /// Address or host name to listen on ("0.0.0.0" or "::" for all interfaces).
  std::string host = config::server{}.host;
  /// TCP port; 0 picks any free one (see `http_server::port()`).
  uint16_t port = static_cast<uint16_t>(config::server{}.port);
  /// Threads that run the connections (Asio threads), >= 1.
  int32_t io_threads = static_cast<int32_t>(config::server{}.io_threads);
  /// Largest request body; a larger one gets 413.
  std::size_t max_body_bytes = static_cast<std::size_t>(config::server{}.max_body_bytes);
  /// Largest request line plus headers; larger ones get 431.
  std::size_t max_header_bytes = static_cast<std::size_t>(config::server{}.max_header_bytes);
  /// How long a connection may wait for its next request (keep-alive), take to send one, or
  /// leave one write of ours unread before it is closed.
  std::chrono::milliseconds idle_timeout = std::chrono::seconds{config::server{}.idle_timeout_s};
  /// The whole request line and headers must arrive within this: counted from the
  /// connection's start for its first request, from the first byte for later ones (waiting
  /// for that byte is `idle_timeout`). A head that is late gets 408; nothing at all, a close.
  std::chrono::milliseconds header_timeout =
      std::chrono::seconds{config::server{}.header_timeout_s};
  /// Open connections at most; a connection beyond this gets 503 and is closed.
  std::size_t max_connections = static_cast<std::size_t>(config::server{}.max_connections);
  /// Open connections from one client address at most; one beyond this gets 429 and is closed.
  std::size_t max_connections_per_address =
      static_cast<std::size_t>(config::server{}.max_connections_per_address);
  /// A repeated warning (refusing connections) is written at most once per this interval,
  /// with the count of the ones held back.
  std::chrono::milliseconds log_repeat_interval{10'000};
  /// How long `begin_drain` lets running requests finish before it cancels them.
  std::chrono::milliseconds drain_timeout = std::chrono::seconds{config::server{}.drain_timeout_s};
  /// Bytes of a stream that may wait unsent for a slow client; beyond this the client's
  /// requests are cancelled and its connection is closed.
  std::size_t max_stream_buffer_bytes =
      static_cast<std::size_t>(config::server{}.max_stream_buffer_bytes);
  /// The most events of a stream that wait to be written together (see stream_pacer.hpp): a
  /// fast stream's events wait at most `stream_delay` to go out together, except each choice's
  /// first, which goes at once, and the stream's end, which takes the rest along. Fewer writes
  /// cost less CPU on both sides. 1, or a zero delay, writes every step's events as they come.
  std::size_t stream_interval = static_cast<std::size_t>(config::server{}.stream_interval);
  /// The longest a stream event waits to be gathered with the following ones.
  std::chrono::milliseconds stream_delay{config::server{}.stream_delay_ms};
  /// Most prompts in one request's prompt array.
  std::size_t max_prompts = static_cast<std::size_t>(config::server{}.max_prompts);
  /// The most choices (`n`) per prompt.
  std::size_t max_n = static_cast<std::size_t>(config::server{}.max_n);
  /// The chat template `POST /v1/chat/completions` (and `/tokenize` of messages) renders
  /// conversations with; null refuses chat with a 400 whose message is `chat_refusal`.
  std::shared_ptr<const chat::chat_template> chat_template;
  /// Why chat is refused without a template (chat::select_chat_template says why).
  std::string chat_refusal{chat::no_chat_template_refusal};
  /// The template of conversations with tools when the model has one for them ("tool_use");
  /// null: `chat_template` serves them.
  std::shared_ptr<const chat::chat_template> tool_chat_template;
  /// The parser of the model's tool calls (`model.tool_call_parser`); empty refuses
  /// tool_choice "auto".
  std::string tool_call_parser;
};

/// An HTTP/1.1 server for `POST /v1/completions`, `POST /v1/chat/completions`,
/// `GET /v1/models`, `GET /health` and `GET /metrics` (see docs/http-api.md). Connections are
/// keep-alive; each is served on its own strand, and every backend event is posted onto that
/// strand. Member functions are thread-safe, but none may be called from inside a backend
/// callback.
class http_server {
 public:
  /// Makes a server for `backend`, which must outlive it. Nothing listens before `start`.
  http_server(server_options options, completion_backend& backend);

  /// Stops the server (see `stop`).
  ~http_server();

  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Binds, listens and starts the I/O threads, then logs "listening on http://HOST:PORT".
  /// Returns an error (and logs it) when the address cannot be resolved or bound; calling it
  /// twice is an error too.
  std::error_code start();

  /// The port the server listens on (the chosen one when `port` was 0); 0 before `start`.
  uint16_t port() const;

  /// Marks the backend ready (or not): `GET /health` answers 503 until it is.
  void set_ready(bool ready);

  /// Moves the clock of the connection deadlines (the request head's, `header_timeout`, and the
  /// idle wait's, `idle_timeout`) forward by `by` (a negative one counts as 0), and has every
  /// connection look at its deadlines at once. For tests: a deadline passes when the test says,
  /// whatever the machine's speed. The other timers (writes, closing, draining) keep the steady
  /// clock.
  void advance_deadline_clock(std::chrono::milliseconds by);

  /// Starts a graceful shutdown: closes the listening socket, answers 503 to new completions
  /// and `/health`, closes each connection after its current response, lets running requests
  /// finish for up to `drain_timeout`, then cancels the rest (their clients get a
  /// `shutting_down` error). `wait` returns once no request runs. Idempotent.
  void begin_drain();

  /// Blocks until the server has stopped: after a drain completed (then it stops the server
  /// itself) or after `stop` was called. Returns at once when the server never started.
  void wait();

  /// Stops at once: closes the listening socket, cancels running requests (their clients get
  /// a `shutting_down` error), gives connections a moment to flush and joins the I/O threads.
  /// Idempotent; late backend events are dropped safely.
  void stop();

 private:
  std::unique_ptr<detail::server_state> state_;
};

}  // namespace conveyor::server
