// Internal: one completion request being answered, without sockets. It fans a prompt array out
// into one backend request per choice, keeps the backend's grip on each, and turns each backend
// event into what the client gets: stream events as they come, or the whole answer at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_parser.hpp"
#include "server/backend.hpp"
#include "server/chunk_writer.hpp"
#include "server/openai.hpp"

namespace conveyor::server::detail {

/// Why a step failed its choice (and with it the whole task).
struct task_failure {
  /// The backend's code.
  ec code{};
  /// The backend's message, for humans.
  std::string message;
  /// The request field it is about, when the backend's message names one the server knows (the
  /// field of an output format the engine could not compile); empty otherwise.
  std::string param;
};

/// What the client gets after one backend step.
struct task_output {
  /// Server-sent events written into the `sse` buffer.
  std::size_t event_count = 0;
  /// The events include their choice's first stream event (its time to first token).
  bool opens_choice = false;
  /// The task is over: a stream ends after its events, a plain answer is `body`.
  bool finished = false;
  /// The whole JSON answer of a plain (not streamed) completion, once finished.
  std::string body;
  /// The step failed its choice: the task fails with this, after the events written before it.
  std::optional<task_failure> failure;
};

/// One completion (or chat completion) request with its choices. Plain state: the connection
/// calls it on its strand and writes what it returns.
class completion_task {
 public:
  /// A task with `choices` choices, `choices_per_prompt` (`n`) of each prompt in turn; `serial`
  /// tells its events from those of older tasks. The usage counts each prompt once, as OpenAI's
  /// does, however many choices it has: its prompt tokens and the cached ones among them, both
  /// from its first choice.
  completion_task(uint64_t serial, completion_meta meta, bool stream, bool include_usage,
                  std::size_t choices, std::size_t choices_per_prompt = 1);

  /// Cancels what still runs (see `cancel`).
  ~completion_task();

  completion_task(const completion_task&) = delete;
  completion_task& operator=(const completion_task&) = delete;

  /// Matches the backend events of this task.
  uint64_t serial() const { return serial_; }

  /// Whether the answer is an event stream.
  bool stream() const { return stream_; }

  /// Reads each chat choice's text as `reading` says (before `submit`): its calls become the
  /// message's `tool_calls` (a stream's `delta.tool_calls`, the first chunk of a call with its
  /// id, type and name) and finish_reason "tool_calls" when it finished otherwise with "stop";
  /// the rest of the text is the content (null in a whole answer of calls alone). A whole
  /// answer forced into calls (a named function, "required") that ended at its length is its
  /// text as content with finish_reason "length" (a stream sent its pieces as they came).
  void read_tool_calls(const tool_call_reading& reading);

  /// Submits `requests[i]` as choice i with `events_for(i)`, in order. Returns a message when
  /// the backend throws; the choices not yet submitted are then never run.
  std::optional<std::string> submit(
      completion_backend& backend, std::vector<completion_request> requests,
      const std::function<completion_events(std::size_t index)>& events_for);

  /// Whether an event of choice `index` still matters (it exists and has not ended).
  bool accepts(std::size_t index) const;

  /// One backend step of choice `index`, its parts in order: the prompt's log-probabilities
  /// (with echo, a stream sends the echoed prompt with them at once), the log-probabilities of
  /// the step's tokens (a stream sends them with the step's text or, for an end token, with the
  /// choice's last chunk), the text (a chunk when streaming, after a chat choice's role chunk;
  /// else kept for the whole answer), then the end. A finished choice sends its last chunk; once
  /// every choice finished, the usage chunk (when asked for) and "[DONE]", or the whole answer.
  /// A failed one ends the choice and reports `failure` (the connection then fails the task).
  /// Stream events are appended to `sse` as they go on the wire ("data: <payload>\n\n" each),
  /// rendered there directly. A step of a choice that ended is ignored.
  task_output on_step(std::size_t index, completion_step step, std::string& sse);

  /// Asks the backend to stop every choice still running and forgets them. Idempotent.
  void cancel();

 private:
  // The parts of a step (see `on_step`); each appends its stream events to `sse`.
  task_output add_logprobs(std::size_t index, std::vector<token_logprob> entries, bool prompt,
                           std::string& sse);
  task_output add_text(std::size_t index, std::string_view text, std::string& sse);
  task_output finish_choice(std::size_t index, std::string finish_reason, completion_usage usage,
                            std::string& sse);

  struct choice_state {
    // The backend's grip on it; reset once it ended.
    std::shared_ptr<request_handle> handle;
    // Text so far (plain answers only).
    std::string text;
    std::string finish_reason;
    completion_usage usage;
    bool done = false;
    // A chat stream sent this choice's first chunk (the assistant role).
    bool role_sent = false;
    // A stream event of this choice was written.
    bool opened = false;
    // The field of the choice's output format (structured outputs); empty for free text.
    std::string format_field;
    // -- tool calls --
    // Reads the text's tool calls; null for plain text.
    std::unique_ptr<chat::tool_call_parser> reader;
    // What the reader reported (whole answers), the calls it began and their ids (streams).
    chat::parsed_tool_output parsed;
    std::size_t calls = 0;
    std::vector<std::string> call_ids;
    // -- log-probabilities and echo --
    // The prompt to send back before the completion (`echo`), until it was sent.
    bool echo = false;
    std::string echo_text;
    // Log-probabilities were asked for: plain answers gather them all, streams those of the
    // text not yet sent.
    bool logprobs = false;
    logprobs_part part;
    // Where the next completion token's text starts in the whole text (code points).
    std::size_t offset = 0;
  };

  // Opens a stream event of choice `index` in `sse` (`out.opens_choice` when it is the first).
  void open_choice_event(std::size_t index, task_output& out, std::string& sse);
  // A chat stream opens each choice with a chunk carrying the assistant role.
  void add_role(std::size_t index, task_output& out, std::string& sse);
  // An echoing choice opens with its prompt (a stream chunk, with the prompt's log-probabilities
  // when given; the start of a plain answer's text).
  void add_echo(std::size_t index, task_output& out, std::string& sse,
                const logprobs_part* prompt = nullptr);
  // A tool call reader's events: stream chunks, or kept for the whole answer.
  void add_tool_events(std::size_t index, const std::vector<chat::tool_call_event>& events,
                       task_output& out, std::string& sse);
  // The log-probabilities a stream chunk carries now (null when none are wanted).
  const logprobs_part* pending(std::size_t index) const;
  completion_usage total_usage() const;

  uint64_t serial_;
  completion_meta meta_;
  // Writes this response's stream chunks.
  chunk_writer chunks_;
  bool stream_;
  bool include_usage_;
  std::vector<choice_state> choices_;
  std::size_t remaining_;
  std::size_t choices_per_prompt_;
};

}  // namespace conveyor::server::detail
