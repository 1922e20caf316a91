#include "chat/chat_template.hpp"

#include "chat/template_ast.hpp"
#include "chat/template_parser.hpp"
#include "chat/template_renderer.hpp"

namespace conveyor::chat {

namespace {

bool mentions(const expr& e, std::string_view name) {
  if (e.type == expr::kind::name && e.name == name) return true;
  for (const auto& a : e.args)
    if (a && mentions(*a, name)) return true;
  for (const auto& kv : e.kwargs)
    if (mentions(*kv.second, name)) return true;
  return false;
}

bool mentions(const node_list& body, std::string_view name) {
  for (const auto& n : body) {
    if (n->value && mentions(*n->value, name)) return true;
    if (n->condition && mentions(*n->condition, name)) return true;
    for (const auto& c : n->conditions)
      if (mentions(*c, name)) return true;
    for (const auto& b : n->bodies)
      if (mentions(b, name)) return true;
    if (mentions(n->body, name) || mentions(n->else_body, name)) return true;
  }
  return false;
}

}  // namespace

expected<chat_template> chat_template::parse(std::string_view source, special_tokens tokens) {
  chat_template result;
  try {
    auto program = std::make_shared<template_program>(parse_template(source));
    result.writes_bos_ = mentions(program->body, "bos_token");
    result.program_ = std::move(program);
  } catch (const template_error& e) {
    return make_error(ec::bad_config, e.what());
  }
  result.tokens_ = std::move(tokens);
  return result;
}

expected<std::string> chat_template::render_text(const std::vector<chat_message>& messages,
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
    return render_template(*program_, variables);
  } catch (const template_raised& e) {
    return make_error(ec::bad_request,
                      std::string{"the chat template refused the conversation: "} + e.what());
  } catch (const template_error& e) {
    return make_error(ec::bad_request, std::string{"rendering the chat template failed: "} +
                                           e.what());
  }
}

expected<chat_prompt> chat_template::render(const std::vector<chat_message>& messages,
                                            bool add_generation_prompt) const {
  auto text = render_text(messages, add_generation_prompt);
  if (!text) return text.error();
  return chat_prompt{std::move(*text), !writes_bos_};
}

std::string_view default_chat_template() {
  return "{% for message in messages %}\n"
         "{{ message['role'] | capitalize }}: {{ message['content'] | trim }}\n"
         "{% endfor %}\n"
         "{% if add_generation_prompt %}Assistant:{% endif %}\n";
}

}  // namespace conveyor::chat
