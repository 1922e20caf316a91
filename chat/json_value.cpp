// JSON as a template's values.
#include "chat/json_value.hpp"

#include <cstdint>
#include <string>

#include "chat/template_ast.hpp"

namespace conveyor::chat {

namespace {

// False when `j` nests deeper than `depth_left`.
bool convert(const nlohmann::ordered_json& j, int depth_left, value& out) {
  using t = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case t::null:
    case t::discarded:
      out = value::none();
      return true;
    case t::boolean:
      out = value{j.get<bool>()};
      return true;
    case t::number_integer:
      out = value{j.get<int64_t>()};
      return true;
    case t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      out = u <= static_cast<uint64_t>(INT64_MAX) ? value{static_cast<int64_t>(u)}
                                                  : value{static_cast<double>(u)};
      return true;
    }
    case t::number_float:
      out = value{j.get<double>()};
      return true;
    case t::string:
      out = value{j.get<std::string>()};
      return true;
    case t::array: {
      if (depth_left == 0) return false;
      value_list list;
      list.reserve(j.size());
      for (const auto& item : j) {
        list.emplace_back();
        if (!convert(item, depth_left - 1, list.back())) return false;
      }
      out = value{std::move(list)};
      return true;
    }
    case t::object: {
      if (depth_left == 0) return false;
      value_map map;
      map.reserve(j.size());
      for (const auto& [key, item] : j.items()) {
        map.emplace_back(key, value{});
        if (!convert(item, depth_left - 1, map.back().second)) return false;
      }
      out = value{std::move(map)};
      return true;
    }
    case t::binary:
      break;
  }
  out = value::none();
  return true;
}

}  // namespace

expected<value> value_from_json(const nlohmann::ordered_json& j) {
  value out;
  if (!convert(j, max_template_nesting, out))
    return make_error(ec::bad_request,
                      "JSON nested more than " + std::to_string(max_template_nesting) + " deep");
  return out;
}

std::string python_json(const nlohmann::ordered_json& j) {
  auto v = value_from_json(j);
  std::string out;
  if (!v || v->to_json(out, -1, SIZE_MAX) != value::json_error::none) return {};
  return out;
}

expected<value> value_from_json_text(std::string_view text) {
  auto j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded()) return make_error(ec::bad_request, "not valid JSON");
  return value_from_json(j);
}

}  // namespace conveyor::chat
