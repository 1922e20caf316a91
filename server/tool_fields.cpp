// The tool fields of a chat body.
#include "server/tool_fields.hpp"

#include <algorithm>
#include <utility>

#include "chat/json_value.hpp"
#include "server/tool_schema.hpp"

namespace conveyor::server::detail {

namespace {

using ojson = nlohmann::ordered_json;

bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

const ojson* ordered_at(const ojson& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

function_tool read_tool(const json& tool, const ojson* ordered, const std::string& where) {
  if (!tool.is_object())
    fail(where, detail::quoted(where) + " must be an object, got " + type_name_of(tool));
  auto* type = find(tool, "type");
  if (!type || *type != "function")
    fail(where + ".type", detail::quoted(where + ".type") + " must be \"function\"" +
                              (type ? ", got " + dump(*type) : std::string{}));
  const std::string at = where + ".function";
  auto* function = find(tool, "function");
  if (!function || !function->is_object())
    fail(at, detail::quoted(at) + " must be an object with 'name'" +
                 (function ? ", got " + std::string{type_name_of(*function)} : std::string{}));
  auto* name = find(*function, "name");
  if (!name || !name->is_string())
    fail(at + ".name", detail::quoted(at + ".name") + " must be a string");
  function_tool result;
  result.name = name->get<std::string>();
  if (!valid_function_name(result.name))
    fail(at + ".name", detail::quoted(at + ".name") +
                           " must be 1 to 64 letters, digits, underscores or dashes, got " +
                           dump(*name));
  if (auto* d = find(*function, "description"); d && !d->is_string())
    fail(at + ".description",
         detail::quoted(at + ".description") + " must be a string, got " + type_name_of(*d));
  if (auto* s = find(*function, "strict"); s && !s->is_boolean())
    fail(at + ".strict",
         detail::quoted(at + ".strict") + " must be a boolean, got " + type_name_of(*s));
  auto* parameters = find(*function, "parameters");
  if (parameters && !parameters->is_object())
    fail(at + ".parameters", detail::quoted(at + ".parameters") +
                                 " must be a JSON schema (an object), got " +
                                 type_name_of(*parameters));
  const ojson* f = ordered ? ordered_at(*ordered, "function") : nullptr;
  const ojson* p = f ? ordered_at(*f, "parameters") : nullptr;
  if (p && !p->is_null())
    result.parameters = *p;
  else
    result.parameters = ojson{{"type", "object"}, {"properties", ojson::object()}};
  return result;
}

}  // namespace

tool_fields parse_tool_fields(const json& obj, const ojson& ordered, std::string_view parser) {
  tool_fields result;
  auto* tools = find(obj, "tools");
  if (tools && !tools->is_array())
    fail("tools",
         "'tools' must be an array of functions, got " + std::string{type_name_of(*tools)});
  const ojson* ordered_tools = tools && !tools->empty() ? ordered_at(ordered, "tools") : nullptr;
  if (tools)
    for (std::size_t i = 0; i < tools->size(); ++i) {
      const std::string where = "tools[" + std::to_string(i) + "]";
      const ojson* ordered_tool = ordered_tools && ordered_tools->is_array() &&
                                          i < ordered_tools->size() &&
                                          (*ordered_tools)[i].is_object()
                                      ? &(*ordered_tools)[i]
                                      : nullptr;
      auto tool = read_tool((*tools)[i], ordered_tool, where);
      for (const auto& known : result.tools)
        if (known.name == tool.name)
          fail(where + ".function.name", detail::quoted(where + ".function.name") + " names \"" +
                                             tool.name + "\" a second time");
      result.tools.push_back(std::move(tool));
    }
  const bool parallel = get_bool(obj, "parallel_tool_calls").value_or(true);
  const bool have_tools = !result.tools.empty();

  // tool_choice: absent is "auto" with tools and "none" without, as OpenAI's.
  auto* choice = find(obj, "tool_choice");
  auto& reading = result.reading;
  if (!choice) {
    reading.type = have_tools ? tool_call_reading::mode::parsed : tool_call_reading::mode::none;
  } else if (choice->is_string()) {
    const auto& c = choice->get_ref<const std::string&>();
    if (c == "none")
      reading.type = tool_call_reading::mode::none;
    else if (c == "auto")
      reading.type = tool_call_reading::mode::parsed;
    else if (c == "required")
      reading.type = tool_call_reading::mode::required;
    else
      fail("tool_choice",
           "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
           "\"function\": {\"name\": ...}}, got " +
               dump(*choice));
  } else if (choice->is_object()) {
    auto* type = find(*choice, "type");
    if (!type || *type != "function")
      fail("tool_choice.type", "'tool_choice.type' must be \"function\"" +
                                   (type ? ", got " + dump(*type) : std::string{}));
    auto* function = find(*choice, "function");
    auto* name = function && function->is_object() ? find(*function, "name") : nullptr;
    if (!name || !name->is_string())
      fail("tool_choice.function.name", "'tool_choice.function.name' must be a string");
    reading.type = tool_call_reading::mode::named;
    reading.function = name->get<std::string>();
  } else {
    fail("tool_choice",
         "'tool_choice' must be a string or an object, got " + std::string{type_name_of(*choice)});
  }
  if (reading.type == tool_call_reading::mode::none) return result;
  if (!have_tools)
    fail("tool_choice", "'tool_choice' " + dump(*choice) + " needs 'tools' (none are given)");

  const function_tool* named = nullptr;
  switch (reading.type) {
    case tool_call_reading::mode::parsed:
      if (parser.empty())
        fail(choice ? "tool_choice" : "tools",
             "tool_choice \"auto\" (the default with 'tools') needs the server to read this "
             "model's tool calls: set model.tool_call_parser (\"hermes\" or \"llama3_json\"), "
             "or ask for tool_choice \"required\" or a named function");
      reading.parser = std::string{parser};
      break;
    case tool_call_reading::mode::named:
      for (const auto& t : result.tools)
        if (t.name == reading.function) named = &t;
      if (!named)
        fail("tool_choice", "'tool_choice' names the function \"" + reading.function +
                                "\", which is not in 'tools'");
      result.constraint.type = sampling::structured_output::kind::json_schema;
      result.constraint.text = named_tool_schema(*named);
      result.constraint.field = "tool_choice";
      break;
    case tool_call_reading::mode::required:
      result.constraint.type = sampling::structured_output::kind::json_schema;
      result.constraint.text = required_tools_schema(result.tools, parallel);
      result.constraint.field = "tool_choice";
      break;
    case tool_call_reading::mode::none:
      break;
  }
  // The template sees the tools as the client gave them.
  auto value = ordered_tools ? chat::value_from_json(*ordered_tools)
                             : chat::value_from_json(ojson::parse(dump(*tools)));
  if (!value) fail("tools", "'tools': " + message_of(value.error()));
  result.template_tools = std::move(*value);
  return result;
}

}  // namespace conveyor::server::detail
