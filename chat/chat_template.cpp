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

expected<std::string> chat_template::render(const std::vector<chat_message>& messages,
                                            bool add_generation_prompt) const {
  value_list list;
  list.reserve(messages.size());
  for (const auto& m : messages)
    list.emplace_back(value_map{{"role", value{m.role}}, {"content", value{m.content}}});
  value variables{value_map{{"messages", value{std::move(list)}},
                            {"add_generation_prompt", value{add_generation_prompt}},
                            {"bos_token", value{tokens_.bos_token}},
                            {"eos_token", value{tokens_.eos_token}},
                            {"tools", value::none()},
                            {"documents", value::none()}}};
  try {
    return render_template(*program_, variables, limits_);
  } catch (const template_raised& e) {
    return make_error(ec::bad_request,
                      std::string{"the chat template refused the conversation: "} + e.what());
  } catch (const template_error& e) {
    return make_error(ec::bad_request, std::string{"rendering the chat template failed: "} +
                                           e.what());
  }
}

}  // namespace conveyor::chat
