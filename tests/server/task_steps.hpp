// Drives a completion_task with backend steps as the connection does, and reads back the stream
// events it wrote: each "data: <payload>\n\n" event's payload.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "server/completion_task.hpp"

namespace conveyor::server::test {

/// What one step gave: the task's output and the payloads of the stream events it wrote.
struct step_result : detail::task_output {
  /// The payloads, in order: JSON objects, and "[DONE]" last.
  std::vector<std::string> events;
};

/// The payloads of the server-sent events in `sse`.
inline std::vector<std::string> payloads(const std::string& sse) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < sse.size()) {
    auto end = sse.find("\n\n", pos);
    if (end == std::string::npos) end = sse.size();
    // Each event is "data: " + payload; payloads (JSON) never hold a raw newline.
    out.push_back(sse.substr(pos + 6, end - pos - 6));
    pos = end + 2;
  }
  return out;
}

/// Feeds `step` to choice `index` of `task`.
inline step_result send_step(detail::completion_task& task, std::size_t index,
                             completion_step step) {
  std::string sse;
  step_result result;
  static_cast<detail::task_output&>(result) = task.on_step(index, std::move(step), sse);
  result.events = payloads(sse);
  return result;
}

/// A step of new text.
inline step_result send_text(detail::completion_task& task, std::size_t index, std::string text) {
  completion_step step;
  step.text = std::move(text);
  return send_step(task, index, std::move(step));
}

/// A step of log-probabilities alone: the prompt's, or those of the tokens of the next text.
inline step_result send_logprobs(detail::completion_task& task, std::size_t index,
                                 std::vector<token_logprob> entries, bool prompt) {
  completion_step step;
  (prompt ? step.prompt_logprobs : step.logprobs) = std::move(entries);
  return send_step(task, index, std::move(step));
}

/// A step that finishes the choice and carries nothing else.
inline step_result send_finish(detail::completion_task& task, std::size_t index,
                               std::string finish_reason, completion_usage usage) {
  completion_step step;
  step.end = completion_step::end_kind::finished;
  step.finish_reason = std::move(finish_reason);
  step.usage = usage;
  return send_step(task, index, std::move(step));
}

}  // namespace conveyor::server::test
