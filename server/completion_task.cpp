// One completion request being answered: fan-out of prompt arrays, choices, stream events.
#include "server/completion_task.hpp"

#include <algorithm>
#include <exception>
#include <iterator>
#include <utility>

#include "common/text.hpp"
#include "server/forced_tool_calls.hpp"

namespace conveyor::server::detail {

completion_task::completion_task(uint64_t serial, completion_meta meta, bool stream,
                                 bool include_usage, std::size_t choices,
                                 std::size_t choices_per_prompt)
    : serial_(serial),
      meta_(std::move(meta)),
      chunks_(meta_),
      stream_(stream),
      include_usage_(include_usage),
      choices_(choices),
      remaining_(choices),
      choices_per_prompt_(std::max<std::size_t>(choices_per_prompt, 1)) {}

completion_task::~completion_task() {
  cancel();
}

std::optional<std::string> completion_task::submit(
    completion_backend& backend, std::vector<completion_request> requests,
    const std::function<completion_events(std::size_t index)>& events_for) {
  for (std::size_t i = 0; i < requests.size() && i < choices_.size(); ++i) {
    auto& choice = choices_[i];
    choice.echo = requests[i].params.echo;
    if (requests[i].params.constraint.active())
      choice.format_field = requests[i].params.constraint.field;
    // A token-id prompt echoes as its text (what /detokenize gives).
    if (choice.echo)
      choice.echo_text = requests[i].prompt_tokens.empty()
                             ? requests[i].prompt
                             : backend.detokenize(requests[i].prompt_tokens);
    choice.logprobs = requests[i].params.logprobs >= 0;
    choice.offset = utf8_code_points(choice.echo_text);
    try {
      // Events are posted onto the connection's strand, so this task is still here when the
      // backend answers from inside submit.
      choices_[i].handle = backend.submit(std::move(requests[i]), events_for(i));
    } catch (const std::exception& e) {
      return std::string{"the backend failed to take the request: "} + e.what();
    }
  }
  return std::nullopt;
}

void completion_task::read_tool_calls(const tool_call_reading& reading) {
  for (auto& choice : choices_) choice.reader = make_tool_call_reader(reading);
}

bool completion_task::accepts(std::size_t index) const {
  return index < choices_.size() && !choices_[index].done;
}

namespace {

// Opens a server-sent event in `sse`; `close_event` ends it.
void open_event(std::string& sse, task_output& out) {
  sse += "data: ";
  ++out.event_count;
}

void close_event(std::string& sse) {
  sse += "\n\n";
}

}  // namespace

void completion_task::open_choice_event(std::size_t index, task_output& out, std::string& sse) {
  auto& choice = choices_[index];
  if (!choice.opened) {
    choice.opened = true;
    out.opens_choice = true;
  }
  open_event(sse, out);
}

void completion_task::add_role(std::size_t index, task_output& out, std::string& sse) {
  auto& choice = choices_[index];
  if (meta_.kind != api_kind::chat_completions || choice.role_sent) return;
  choice.role_sent = true;
  open_choice_event(index, out, sse);
  chunks_.append_role_chunk(sse, index);
  close_event(sse);
}

void completion_task::add_echo(std::size_t index, task_output& out, std::string& sse,
                               const logprobs_part* prompt) {
  auto& choice = choices_[index];
  if (!choice.echo) return;
  choice.echo = false;
  if (stream_) {
    open_choice_event(index, out, sse);
    chunks_.append_chunk(sse, index, choice.echo_text, std::nullopt, prompt);
    close_event(sse);
  } else {
    choice.text.insert(0, choice.echo_text);
  }
}

const logprobs_part* completion_task::pending(std::size_t index) const {
  return choices_[index].logprobs ? &choices_[index].part : nullptr;
}

task_output completion_task::add_logprobs(std::size_t index, std::vector<token_logprob> entries,
                                          bool prompt, std::string& sse) {
  task_output out;
  if (!accepts(index)) return out;
  auto& choice = choices_[index];
  if (!choice.logprobs) return out;
  logprobs_part part;
  // The prompt's tokens start the whole text; the completion's continue after the echo.
  std::size_t offset = prompt ? 0 : choice.offset;
  for (auto& e : entries) {
    part.text_offsets.push_back(offset);
    offset += utf8_code_points(e.token);
    part.tokens.push_back(std::move(e));
  }
  if (!prompt) choice.offset = offset;
  if (prompt && stream_) {
    add_echo(index, out, sse, &part);
    return out;
  }
  add_echo(index, out, sse);
  auto& into = choice.part;
  into.tokens.insert(into.tokens.end(), std::make_move_iterator(part.tokens.begin()),
                     std::make_move_iterator(part.tokens.end()));
  into.text_offsets.insert(into.text_offsets.end(), part.text_offsets.begin(),
                           part.text_offsets.end());
  return out;
}

void completion_task::add_tool_events(std::size_t index,
                                      const std::vector<chat::tool_call_event>& events,
                                      task_output& out, std::string& sse) {
  auto& choice = choices_[index];
  for (const auto& e : events) {
    const bool call = e.type == chat::tool_call_event::kind::call;
    if (call && !e.name.empty()) {
      ++choice.calls;
      if (stream_) choice.call_ids.push_back(make_tool_call_id());
    }
    if (!stream_) continue;
    if (!call && e.text.empty()) continue;
    add_role(index, out, sse);
    open_choice_event(index, out, sse);
    if (call)
      chunks_.append_tool_call_chunk(sse, index, e.index,
                                     e.name.empty() ? std::string_view{} : choice.call_ids[e.index],
                                     e.name, e.text, pending(index));
    else
      chunks_.append_chunk(sse, index, e.text, std::nullopt, pending(index));
    close_event(sse);
    if (choice.logprobs) choice.part = {};
  }
  if (!stream_) choice.parsed.add(events);
}

task_output completion_task::add_text(std::size_t index, std::string_view text, std::string& sse) {
  task_output out;
  if (!accepts(index)) return out;
  add_echo(index, out, sse);
  if (auto& reader = choices_[index].reader) {
    std::vector<chat::tool_call_event> events;
    reader->feed(text, events);
    if (!stream_) choices_[index].text += text;
    add_tool_events(index, events, out, sse);
    return out;
  }
  if (!stream_) {
    choices_[index].text += text;
    return out;
  }
  if (text.empty()) return out;
  add_role(index, out, sse);
  open_choice_event(index, out, sse);
  chunks_.append_chunk(sse, index, text, std::nullopt, pending(index));
  close_event(sse);
  if (choices_[index].logprobs) choices_[index].part = {};
  return out;
}

task_output completion_task::finish_choice(std::size_t index, std::string finish_reason,
                                           completion_usage usage, std::string& sse) {
  task_output out;
  if (!accepts(index)) return out;
  auto& choice = choices_[index];
  choice.done = true;
  choice.handle.reset();
  if (choice.reader) {
    std::vector<chat::tool_call_event> events;
    choice.reader->finish(events);
    add_tool_events(index, events, out, sse);
    if (choice.calls > 0 && finish_reason == "stop") finish_reason = "tool_calls";
  }
  choice.finish_reason = std::move(finish_reason);
  choice.usage = usage;
  // The prompt's tokens count once, with its first choice, and so do those of them that were
  // read from the prefix cache: the usage's cached tokens are a part of its prompt tokens.
  if (index % choices_per_prompt_ != 0) {
    choice.usage.prompt_tokens = 0;
    choice.usage.cached_tokens = 0;
  }
  remaining_ -= 1;
  add_echo(index, out, sse);
  if (stream_) {
    add_role(index, out, sse);
    open_choice_event(index, out, sse);
    chunks_.append_chunk(sse, index, "", std::string_view{choice.finish_reason}, pending(index));
    close_event(sse);
    choice.part = {};
  }
  if (remaining_ > 0) return out;
  out.finished = true;
  if (stream_) {
    if (include_usage_) {
      open_event(sse, out);
      chunks_.append_usage_chunk(sse, total_usage());
      close_event(sse);
    }
    open_event(sse, out);
    sse += "[DONE]";
    close_event(sse);
    return out;
  }
  std::vector<choice_result> results;
  results.reserve(choices_.size());
  for (auto& c : choices_) {
    results.push_back({std::move(c.text), std::move(c.finish_reason), c.usage});
    if (c.logprobs) results.back().logprobs = std::move(c.part);
    if (!c.reader) continue;
    // The whole answer of a choice whose text a reader read: what its stream's events carry. A
    // forced answer cut at its length keeps the call it was writing, arguments cut as they are
    // (finish_reason "length"), as a stream has sent them.
    auto& result = results.back();
    result.text = std::move(c.parsed.content);
    if (c.calls == 0) continue;
    result.null_content = result.text.empty();
    for (auto& call : c.parsed.calls)
      result.tool_calls.push_back(
          {make_tool_call_id(), std::move(call.name), std::move(call.arguments)});
  }
  out.body = render_completion(meta_, results);
  return out;
}

task_output completion_task::on_step(std::size_t index, completion_step step, std::string& sse) {
  task_output out;  // the events of the parts before the end
  if (!accepts(index)) return out;
  auto add = [&out](const task_output& part) {
    out.event_count += part.event_count;
    out.opens_choice = out.opens_choice || part.opens_choice;
  };
  if (!step.prompt_logprobs.empty())
    add(add_logprobs(index, std::move(step.prompt_logprobs), true, sse));
  if (!step.logprobs.empty()) add(add_logprobs(index, std::move(step.logprobs), false, sse));
  if (!step.text.empty()) add(add_text(index, step.text, sse));
  switch (step.end) {
    case completion_step::end_kind::none:
      break;
    case completion_step::end_kind::finished: {
      auto last = finish_choice(index, std::move(step.finish_reason), step.usage, sse);
      last.event_count += out.event_count;
      last.opens_choice = last.opens_choice || out.opens_choice;
      return last;
    }
    case completion_step::end_kind::failed:
      choices_[index].done = true;
      choices_[index].handle.reset();
      out.failure = task_failure{step.code, std::move(step.message), {}};
      // The pipeline names an output format it could not compile by its field: "'x': ...".
      if (const auto& field = choices_[index].format_field;
          !field.empty() && out.failure->message.rfind("'" + field + "':", 0) == 0)
        out.failure->param = field;
      break;
  }
  return out;
}

void completion_task::cancel() {
  for (auto& c : choices_) {
    if (c.handle && !c.done) c.handle->cancel();
    c.handle.reset();
    c.done = true;
  }
}

completion_usage completion_task::total_usage() const {
  completion_usage total;
  for (const auto& c : choices_) {
    total.prompt_tokens += c.usage.prompt_tokens;
    total.completion_tokens += c.usage.completion_tokens;
    total.cached_tokens += c.usage.cached_tokens;
  }
  return total;
}

}  // namespace conveyor::server::detail
