#include "bench/output_formats.hpp"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace conveyor::bench {

const std::string& bench_json_schema() {
  static const std::string schema =
      R"({"type": "object", "properties": {"age": {"type": "integer"}, "color": {"enum": )"
      R"(["red", "green", "blue"]}, "height": {"type": "number"}, "member": {"type": "boolean"}, )"
      R"("name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}, )"
      R"("required": ["age", "color", "height", "member", "name", "tags"]})";
  return schema;
}

std::optional<std::string> check(const output_formats& formats) {
  const double f = formats.json_schema_fraction;
  if (std::isfinite(f) && f >= 0 && f <= 1) return std::nullopt;
  char got[64];
  std::snprintf(got, sizeof(got), "%g", f);
  return std::string{"--json-schema-fraction: must be in [0, 1], got "} + got;
}

bool constrained(const output_formats& formats, std::size_t index) {
  // Request i is the one that brings floor(n * fraction) of the first n to its next integer.
  const double f = formats.json_schema_fraction;
  return std::floor(double(index + 1) * f) > std::floor(double(index) * f);
}

sampling::structured_output bench_constraint() {
  sampling::structured_output c;
  c.type = sampling::structured_output::kind::json_schema;
  c.text = bench_json_schema();
  c.field = "response_format";
  return c;
}

void add_format_to_body(nlohmann::json& body) {
  body["response_format"] = {
      {"type", "json_schema"},
      {"json_schema", {{"name", "bench"}, {"schema", nlohmann::json::parse(bench_json_schema())}}}};
}

nlohmann::json to_json(const output_formats& formats) {
  auto out = nlohmann::json::object();
  if (formats.json_schema_fraction > 0) {
    out["json_schema_fraction"] = formats.json_schema_fraction;
    out["json_schema"] = nlohmann::json::parse(bench_json_schema());
  }
  return out;
}

}  // namespace conveyor::bench
