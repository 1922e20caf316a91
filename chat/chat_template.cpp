#include "chat/chat_template.hpp"

#include "chat/template_ast.hpp"
#include "chat/template_parser.hpp"
#include "chat/template_renderer.hpp"

namespace conveyor::chat {

expected<chat_template> chat_template::parse(std::string_view source, special_tokens tokens,
                                             render_limits limits) {
  chat_template result;
  try {
    result.program_ = std::make_shared<template_program>(parse_template(source));
  } catch (const template_error& e) {
    return make_error(ec::bad_config, e.what());
  }
  result.tokens_ = std::move(tokens);
  result.limits_ = limits;
  return result;
}

namespace {

// A message as the map transformers passes: the keys a message has, in OpenAI's order.
value message_value(const chat_message& m) {
  value_map map{{"role", value{m.role}},
                {"content", m.content ? value{*m.content} : value::none()}};
  if (!m.tool_calls.empty()) {
    value_list calls;
    calls.reserve(m.tool_calls.size());
    for (const auto& c : m.tool_calls)
      calls.emplace_back(value_map{
          {"id", value{c.id}},
          {"type", value{"function"}},
          {"function", value{value_map{{"name", value{c.name}}, {"arguments", c.arguments}}}}});
    map.emplace_back("tool_calls", value{std::move(calls)});
  }
  if (!m.tool_call_id.empty()) map.emplace_back("tool_call_id", value{m.tool_call_id});
  if (!m.name.empty()) map.emplace_back("name", value{m.name});
  return value{std::move(map)};
}

std::tm local_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

}  // namespace

expected<std::string> chat_template::render(const std::vector<chat_message>& messages,
                                            bool add_generation_prompt) const {
  render_options options;
  options.add_generation_prompt = add_generation_prompt;
  return render(messages, options);
}

expected<std::string> chat_template::render(const std::vector<chat_message>& messages,
                                            const render_options& options) const {
  value_list list;
  list.reserve(messages.size());
  for (const auto& m : messages) list.push_back(message_value(m));
  value variables{value_map{{"messages", value{std::move(list)}},
                            {"add_generation_prompt", value{options.add_generation_prompt}},
                            {"bos_token", value{tokens_.bos_token}},
                            {"eos_token", value{tokens_.eos_token}},
                            {"tools", options.tools},
                            {"documents", value::none()}}};
  try {
    return render_template(*program_, variables, limits_, options.now ? *options.now : local_now());
  } catch (const template_raised& e) {
    return make_error(ec::bad_request,
                      std::string{"the chat template refused the conversation: "} + e.what());
  } catch (const template_error& e) {
    return make_error(ec::bad_request, std::string{"rendering the chat template failed: "} +
                                           e.what());
  }
}

}  // namespace conveyor::chat
