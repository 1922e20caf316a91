// Known, refused and unknown request fields.
#include "server/field_policy.hpp"

#include <algorithm>
#include <mutex>
#include <unordered_set>

#include <spdlog/spdlog.h>

namespace conveyor::server::detail {

namespace {

// Fields both endpoints know: OpenAI's shared ones, vLLM's sampling extras and Conveyor's own.
constexpr std::string_view shared_fields[] = {
    // OpenAI
    "model", "frequency_penalty", "logit_bias", "logprobs", "max_tokens", "n", "presence_penalty",
    "seed", "stop", "stream", "stream_options", "temperature", "top_p", "user",
    // vLLM's sampling parameters
    "top_k", "min_p", "repetition_penalty", "min_tokens", "stop_token_ids", "ignore_eos",
    "use_beam_search", "length_penalty", "include_stop_str_in_output", "skip_special_tokens",
    "spaces_between_special_tokens", "truncate_prompt_tokens", "allowed_token_ids", "bad_words",
    "prompt_logprobs", "guided_json", "guided_regex", "guided_choice", "guided_grammar",
    "guided_decoding_backend", "guided_whitespace_pattern", "structural_tag", "structured_outputs",
    "echo", "add_special_tokens", "response_format", "request_id", "return_tokens_as_token_ids",
    // Conveyor
    "priority", "timeout"};

constexpr std::string_view completion_fields[] = {"prompt", "best_of", "suffix"};

constexpr std::string_view chat_fields[] = {
    "messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice", "functions",
    "function_call", "parallel_tool_calls", "metadata", "store", "service_tier", "modalities",
    "audio", "prediction", "reasoning_effort", "web_search_options",
    // vLLM's chat extras
    "add_generation_prompt", "continue_final_message", "chat_template", "chat_template_kwargs",
    "documents", "mm_processor_kwargs"};

bool known(std::string_view name, api_kind kind) {
  auto in = [&](const auto& list) {
    return std::find(std::begin(list), std::end(list), name) != std::end(list);
  };
  return in(shared_fields) ||
         (kind == api_kind::completions ? in(completion_fields) : in(chat_fields));
}

// True when `j` is absent, null or equal to `plain`.
bool absent_or(const json& obj, const char* name, const json& plain) {
  auto* j = find(obj, name);
  return !j || *j == plain;
}

bool absent_or_empty(const json& obj, const char* name) {
  auto* j = find(obj, name);
  return !j || ((j->is_array() || j->is_object() || j->is_string()) && j->empty());
}

void refuse(const char* name, const std::string& why) {
  fail(name, quoted(name) + " " + why);
}

}  // namespace

void refuse_unapplied(const json& obj, api_kind kind) {
  // vLLM's sampling extras that Conveyor does not implement.
  if (auto* m = find(obj, "min_p"); m && !(m->is_number() && m->get<double>() == 0))
    refuse("min_p", "is not supported (only 0)");
  if (!absent_or(obj, "use_beam_search", false)) refuse("use_beam_search", "is not supported");
  if (auto* l = find(obj, "length_penalty"); l && !(l->is_number() && l->get<double>() == 1))
    refuse("length_penalty", "is not supported (only 1; there is no beam search)");
  if (!absent_or(obj, "include_stop_str_in_output", false))
    refuse("include_stop_str_in_output", "is not supported (the stop string is never output)");
  if (!absent_or(obj, "skip_special_tokens", true))
    refuse("skip_special_tokens", "is not supported (special tokens never give text)");
  if (!absent_or(obj, "spaces_between_special_tokens", true))
    refuse("spaces_between_special_tokens", "is not supported");
  for (const char* name : {"truncate_prompt_tokens", "prompt_logprobs", "structural_tag",
                           "guided_decoding_backend", "guided_whitespace_pattern"})
    if (find(obj, name)) refuse(name, "is not supported");
  for (const char* name : {"allowed_token_ids", "bad_words"})
    if (!absent_or_empty(obj, name)) refuse(name, "is not supported");
  if (!absent_or(obj, "return_tokens_as_token_ids", false))
    refuse("return_tokens_as_token_ids", "is not supported");
  if (kind == api_kind::completions) return;
  // Chat: OpenAI's fields beyond plain text.
  if (auto* c = find(obj, "function_call"); c && !(*c == "none" || *c == "auto"))
    refuse("function_call",
           "other than \"none\" or \"auto\" is not supported (it is deprecated): give "
           "'tools' and 'tool_choice'");
  if (!absent_or(obj, "store", false)) refuse("store", "is not supported (nothing is stored)");
  if (auto* t = find(obj, "service_tier"); t && !(*t == "auto" || *t == "default"))
    refuse("service_tier", "other than \"auto\" or \"default\" is not supported");
  if (auto* m = find(obj, "modalities"); m && *m != json::array({"text"}))
    refuse("modalities", "other than [\"text\"] is not supported");
  for (const char* name : {"audio", "prediction", "reasoning_effort", "web_search_options",
                           "chat_template", "documents", "mm_processor_kwargs"})
    if (find(obj, name)) refuse(name, "is not supported");
  if (!absent_or_empty(obj, "chat_template_kwargs"))
    refuse("chat_template_kwargs", "is not supported");
  if (!absent_or(obj, "continue_final_message", false))
    refuse("continue_final_message", "is not supported");
  if (!absent_or(obj, "echo", false)) refuse("echo", "is not supported for chat");
  if (!absent_or(obj, "add_special_tokens", false))
    refuse("add_special_tokens",
           "is not supported for chat (the chat template decides the special tokens)");
}

std::vector<std::string> unknown_fields(const json& obj, api_kind kind) {
  std::vector<std::string> result;
  for (const auto& item : obj.items())
    if (!known(item.key(), kind)) result.push_back(item.key());
  return result;
}

std::vector<std::string> log_unknown_fields(const json& obj, api_kind kind, std::size_t max_names) {
  static std::mutex mutex;
  static std::unordered_set<std::string> logged;
  std::vector<std::string> now;
  auto names = unknown_fields(obj, kind);
  if (names.empty()) return now;
  {
    std::lock_guard<std::mutex> lock{mutex};
    for (auto& name : names) {
      if (logged.size() >= max_names) break;
      if (logged.insert(name).second) now.push_back(std::move(name));
    }
  }
  for (const auto& name : now)
    spdlog::warn("ignoring the unknown request field {} of {} (logged once)",
                 dump(json(name.size() > 80 ? name.substr(0, 80) + "..." : name)),
                 kind == api_kind::completions ? "/v1/completions" : "/v1/chat/completions");
  return now;
}

}  // namespace conveyor::server::detail
