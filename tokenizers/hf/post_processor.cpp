// TemplateProcessing's "single" template reduced to prefix and suffix ids.
#include "tokenizers/hf/post_processor.hpp"

#include <nlohmann/json.hpp>

namespace conveyor::tokenizers::hf {

namespace {

expected<void> add(const nlohmann::json& value, const std::string& origin, sequence_template& out) {
  if (value.is_null()) return {};
  if (!value.is_object() || !value.contains("type") || !value["type"].is_string())
    return make_error(ec::bad_file,
                      origin + ": post_processor must be null or an object with a 'type'");
  out.present = true;
  const auto type = value["type"].get<std::string>();
  if (type == "ByteLevel") return {};  // offsets only
  if (type == "Sequence") {
    auto list = value.find("processors");
    if (list == value.end() || !list->is_array())
      return make_error(ec::bad_file, origin + ": post_processor Sequence needs 'processors'");
    for (const auto& item : *list)
      if (auto ok = add(item, origin, out); !ok) return ok;
    return {};
  }
  if (type != "TemplateProcessing")
    return make_error(ec::bad_file, origin + ": post_processor type '" + type +
                                        "' is not supported; supported: TemplateProcessing, "
                                        "ByteLevel, Sequence");
  const std::string where = origin + ": post_processor TemplateProcessing";
  auto single = value.find("single");
  auto specials = value.find("special_tokens");
  if (single == value.end() || !single->is_array())
    return make_error(ec::bad_file, where + " needs a 'single' list");
  bool after = false;
  bool seen_sequence = false;
  for (const auto& item : *single) {
    if (item.contains("Sequence")) {
      if (seen_sequence)
        return make_error(ec::bad_file, where + ": 'single' names a sequence twice");
      seen_sequence = after = true;
      continue;
    }
    if (!item.contains("SpecialToken") || !item["SpecialToken"].contains("id") ||
        !item["SpecialToken"]["id"].is_string())
      return make_error(ec::bad_file, where + ": 'single' items must be Sequence or SpecialToken");
    const auto name = item["SpecialToken"]["id"].get<std::string>();
    if (specials == value.end() || !specials->is_object() || !specials->contains(name) ||
        !(*specials)[name].contains("ids") || !(*specials)[name]["ids"].is_array())
      return make_error(ec::bad_file,
                        where + ": special token '" + name + "' is not in 'special_tokens'");
    for (const auto& id : (*specials)[name]["ids"]) {
      if (!id.is_number_integer())
        return make_error(ec::bad_file, where + ": ids of '" + name + "' must be integers");
      (after ? out.suffix : out.prefix).push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  return {};
}

}  // namespace

expected<sequence_template> parse_post_processor(const nlohmann::json& value,
                                                 const std::string& origin) {
  sequence_template out;
  if (auto ok = add(value, origin, out); !ok) return ok.error();
  return out;
}

}  // namespace conveyor::tokenizers::hf
