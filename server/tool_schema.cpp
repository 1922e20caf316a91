// The schemas of forced tool calls.
#include "server/tool_schema.hpp"

namespace conveyor::server::detail {

namespace {

using ojson = nlohmann::ordered_json;

std::string dump_ordered(const ojson& j) {
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

}  // namespace

std::string named_tool_schema(const function_tool& tool) {
  return dump_ordered(tool.parameters);
}

std::string required_tools_schema(const std::vector<function_tool>& tools, bool parallel) {
  ojson alternatives = ojson::array();
  ojson defs = ojson::object();
  for (const auto& tool : tools) {
    ojson parameters = tool.parameters;
    if (parameters.is_object()) {
      if (auto d = parameters.find("$defs"); d != parameters.end() && d->is_object()) {
        for (const auto& [name, def] : d->items()) {
          if (auto known = defs.find(name); known != defs.end() && *known != def)
            fail("tools", "'tools' define the schema '$defs/" + name +
                              "' differently in two functions; tool_choice \"required\" needs "
                              "one definition of each name");
          defs[name] = def;
        }
        parameters.erase("$defs");
      }
    }
    alternatives.push_back(
        ojson{{"properties",
               {{"name", {{"type", "string"}, {"enum", ojson::array({tool.name})}}},
                {"parameters", std::move(parameters)}}},
              {"required", {"name", "parameters"}}});
  }
  ojson schema{{"type", "array"},
               {"minItems", 1},
               {"items", {{"type", "object"}, {"anyOf", std::move(alternatives)}}}};
  if (!parallel) schema["maxItems"] = 1;
  if (!defs.empty()) schema["$defs"] = std::move(defs);
  return dump_ordered(schema);
}

}  // namespace conveyor::server::detail
