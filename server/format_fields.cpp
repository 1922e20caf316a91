#include "server/format_fields.hpp"

#include <string>
#include <utility>
#include <vector>

#include "server/request_fields.hpp"

namespace conveyor::server::detail {

namespace {

using kind = sampling::structured_output::kind;

sampling::structured_output make(kind type, std::string text, std::string field) {
  sampling::structured_output c;
  c.type = type;
  c.text = std::move(text);
  c.field = std::move(field);
  return c;
}

// A JSON schema given as an object or a boolean, or as the text of one.
std::string schema_text(const json& j, const std::string& param) {
  if (j.is_object() || j.is_boolean()) return dump(j);
  if (j.is_string()) {
    auto parsed = json::parse(j.get<std::string>(), nullptr, false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean()))
      fail(param, detail::quoted(param) +
                      " must be a JSON schema (an object), got a string that is not one");
    return dump(parsed);
  }
  fail(param, detail::quoted(param) + " must be a JSON schema (an object), got " + type_name_of(j));
}

std::string nonempty_string(const json& j, const std::string& param) {
  if (!j.is_string())
    fail(param, detail::quoted(param) + " must be a string, got " + type_name_of(j));
  if (j.get_ref<const std::string&>().empty())
    fail(param, detail::quoted(param) + " must not be empty");
  return j.get<std::string>();
}

sampling::structured_output choice_of(const json& j, const std::string& param) {
  if (!j.is_array() || j.empty())
    fail(param, detail::quoted(param) + " must be a non-empty array of strings");
  sampling::structured_output c;
  c.type = kind::choice;
  c.field = param;
  for (std::size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_string())
      fail(param, detail::quoted(param + "[" + std::to_string(i) + "]") +
                      " must be a string, got " + type_name_of(j[i]));
    c.choices.push_back(j[i].get<std::string>());
  }
  return c;
}

sampling::structured_output response_format(const json& f) {
  const std::string param = "response_format";
  if (!f.is_object())
    fail(param, std::string{"'response_format' must be an object, got "} + type_name_of(f));
  auto* type = find(f, "type");
  if (!type || !type->is_string())
    fail("response_format.type",
         "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
  const auto& t = type->get_ref<const std::string&>();
  if (t == "text") return {};
  if (t == "json_object") return make(kind::json_schema, R"({"type":"object"})", param);
  if (t != "json_schema")
    fail("response_format.type",
         "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got " +
             type->dump());
  auto* spec = find(f, "json_schema");
  if (!spec || !spec->is_object())
    fail("response_format.json_schema",
         "'response_format.json_schema' must be an object with 'name' and 'schema'");
  auto* name = find(*spec, "name");
  if (name && !name->is_string())
    fail("response_format.json_schema.name", "'response_format.json_schema.name' must be a string");
  if (auto* strict = find(*spec, "strict"); strict && !strict->is_boolean())
    fail("response_format.json_schema.strict",
         "'response_format.json_schema.strict' must be a boolean");
  auto* schema = find(*spec, "schema");
  // OpenAI's schema may be left out: any JSON object then.
  if (!schema) return make(kind::json_schema, R"({"type":"object"})", param);
  return make(kind::json_schema, schema_text(*schema, "response_format.json_schema.schema"), param);
}

sampling::structured_output structured_outputs(const json& s) {
  const std::string param = "structured_outputs";
  if (!s.is_object())
    fail(param, std::string{"'structured_outputs' must be an object, got "} + type_name_of(s));
  std::vector<sampling::structured_output> found;
  for (const auto& item : s.items()) {
    const std::string& key = item.key();
    const json& v = item.value();
    const std::string field = param + "." + key;
    if (v.is_null()) continue;
    if (key == "json")
      found.push_back(make(kind::json_schema, schema_text(v, field), field));
    else if (key == "regex")
      found.push_back(make(kind::regex, nonempty_string(v, field), field));
    else if (key == "choice")
      found.push_back(choice_of(v, field));
    else if (key == "grammar")
      found.push_back(make(kind::grammar, nonempty_string(v, field), field));
    else if (key == "json_object") {
      if (!v.is_boolean()) fail(field, detail::quoted(field) + " must be a boolean");
      if (v.get<bool>()) found.push_back(make(kind::json_schema, R"({"type":"object"})", field));
    } else {
      fail(field, detail::quoted(field) +
                      " is not supported (structured_outputs takes one of json, regex, choice, "
                      "grammar, json_object)");
    }
  }
  if (found.size() > 1)
    fail(param, "'structured_outputs' must name one format, got " + std::to_string(found.size()));
  return found.empty() ? sampling::structured_output{} : std::move(found.front());
}

}  // namespace

sampling::structured_output parse_output_format(const json& obj) {
  std::vector<sampling::structured_output> found;
  if (auto* f = find(obj, "response_format")) {
    auto c = response_format(*f);
    if (c.active()) found.push_back(std::move(c));
  }
  if (auto* s = find(obj, "structured_outputs")) {
    auto c = structured_outputs(*s);
    if (c.active()) found.push_back(std::move(c));
  }
  // vLLM's older names of the same formats.
  if (auto* j = find(obj, "guided_json"))
    found.push_back(make(kind::json_schema, schema_text(*j, "guided_json"), "guided_json"));
  if (auto* j = find(obj, "guided_regex"))
    found.push_back(make(kind::regex, nonempty_string(*j, "guided_regex"), "guided_regex"));
  if (auto* j = find(obj, "guided_choice")) found.push_back(choice_of(*j, "guided_choice"));
  if (auto* j = find(obj, "guided_grammar"))
    found.push_back(make(kind::grammar, nonempty_string(*j, "guided_grammar"), "guided_grammar"));
  if (found.size() > 1)
    fail(found[1].field, detail::quoted(found[1].field) + " and " + detail::quoted(found[0].field) +
                             " both ask for an output format; give one");
  return found.empty() ? sampling::structured_output{} : std::move(found.front());
}

void keep_schema_order(std::string_view body, std::vector<completion_request>& requests) {
  if (requests.empty()) return;
  const auto& c = requests.front().params.constraint;
  if (c.type != kind::json_schema) return;
  // The field names where the schema is: "response_format" (its json_schema.schema),
  // "structured_outputs.json", "guided_json"; json_object's fixed schema has no order to keep.
  auto ordered = nlohmann::ordered_json::parse(body, nullptr, false);
  if (ordered.is_discarded() || !ordered.is_object()) return;
  const nlohmann::ordered_json* at = nullptr;
  auto child = [](const nlohmann::ordered_json* j,
                  const char* key) -> const nlohmann::ordered_json* {
    if (!j || !j->is_object()) return nullptr;
    auto it = j->find(key);
    return it == j->end() ? nullptr : &*it;
  };
  if (c.field == "response_format")
    at = child(child(child(&ordered, "response_format"), "json_schema"), "schema");
  else if (c.field == "structured_outputs.json")
    at = child(child(&ordered, "structured_outputs"), "json");
  else if (c.field == "guided_json")
    at = child(&ordered, "guided_json");
  if (!at) return;
  std::string text;
  if (at->is_string()) {
    auto parsed = nlohmann::ordered_json::parse(at->get<std::string>(), nullptr, false);
    if (parsed.is_discarded()) return;
    text = parsed.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  } else {
    text = at->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  for (auto& r : requests)
    if (r.params.constraint.type == kind::json_schema) r.params.constraint.text = text;
}

}  // namespace conveyor::server::detail
