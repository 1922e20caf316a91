// The tokenizer.json decoders Conveyor supports, reduced to per-token bytes.
#include "tokenizers/hf/decoder.hpp"

#include <nlohmann/json.hpp>

#include "common/text.hpp"
#include "tokenizers/hf/byte_level.hpp"

namespace conveyor::tokenizers::hf {

namespace {

constexpr const char* supported_decoders =
    "ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

expected<void> decoder::add(const nlohmann::json& value, const std::string& origin, decoder& out) {
  if (!value.is_object() || !value.contains("type") || !value["type"].is_string())
    return make_error(ec::bad_file, origin +
                                        ": decoder must be an object with a 'type' (null is "
                                        "not supported)");
  const auto type = value["type"].get<std::string>();
  if (type == "Sequence") {
    auto list = value.find("decoders");
    if (list == value.end() || !list->is_array())
      return make_error(ec::bad_file, origin + ": decoder Sequence needs a 'decoders' list");
    for (const auto& item : *list)
      if (auto ok = add(item, origin, out); !ok) return ok;
    return {};
  }
  if (type == "ByteLevel") {
    out.steps_.push_back({kind::byte_level, {}, {}});
    return {};
  }
  if (type == "ByteFallback") {
    out.steps_.push_back({kind::byte_fallback, {}, {}});
    return {};
  }
  if (type == "Fuse") {
    out.fused_ = true;
    return {};
  }
  if (type == "Replace") {
    auto pattern = value.find("pattern");
    auto content = value.find("content");
    if (pattern == value.end() || !pattern->is_object() || !pattern->contains("String") ||
        !(*pattern)["String"].is_string() || (*pattern)["String"].get<std::string>().empty() ||
        content == value.end() || !content->is_string())
      return make_error(ec::bad_file, origin +
                                          ": decoder Replace needs a {\"String\"} 'pattern' (a "
                                          "Regex pattern is not supported) and a string 'content'");
    out.steps_.push_back(
        {kind::replace, (*pattern)["String"].get<std::string>(), content->get<std::string>()});
    return {};
  }
  if (type == "Strip") {
    const auto number = [&](const char* key) {
      auto it = value.find(key);
      return it != value.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
    };
    auto content = value.find("content");
    const bool space =
        content != value.end() && content->is_string() && content->get<std::string>() == " ";
    if (!out.fused_ || !space || number("start") > 1 || number("stop") != 0)
      return make_error(ec::bad_file, origin +
                                          ": decoder Strip is supported only after Fuse, with "
                                          "content ' ', start 0 or 1 and stop 0");
    if (number("start") == 1) out.strips_leading_space_ = true;
    return {};
  }
  if (type == "Metaspace") {
    auto replacement = value.find("replacement");
    if (replacement == value.end() || !replacement->is_string() ||
        replacement->get<std::string>().empty())
      return make_error(ec::bad_file, origin + ": decoder Metaspace needs a 'replacement'");
    bool prepend = true;
    if (auto it = value.find("add_prefix_space"); it != value.end() && it->is_boolean())
      prepend = it->get<bool>();
    if (auto it = value.find("prepend_scheme"); it != value.end() && it->is_string())
      prepend = it->get<std::string>() != "never";
    out.steps_.push_back({kind::metaspace, replacement->get<std::string>(), " "});
    if (prepend) out.strips_leading_space_ = true;
    return {};
  }
  return make_error(ec::bad_file, origin + ": decoder type '" + type +
                                      "' is not supported; supported: " + supported_decoders);
}

expected<decoder> decoder::parse(const nlohmann::json& value, const std::string& origin) {
  decoder out;
  if (auto ok = add(value, origin, out); !ok) return ok.error();
  return out;
}

std::string decoder::token_bytes(const std::string& token) const {
  bool byte_fallback = false;
  return decode(token, byte_fallback);
}

bool decoder::is_byte_fallback(const std::string& token) const {
  bool byte_fallback = false;
  decode(token, byte_fallback);
  return byte_fallback;
}

std::string decoder::decode(const std::string& token, bool& byte_fallback) const {
  byte_fallback = false;
  std::string text = token;
  std::string scratch;
  for (const auto& s : steps_) {
    switch (s.what) {
      case kind::byte_level:
        // A token with a character outside the byte alphabet (an added token) stays as it is.
        if (chars_to_bytes(text, scratch)) text.swap(scratch);
        break;
      case kind::replace:
      case kind::metaspace:
        replace_all(text, s.from, s.to);
        break;
      case kind::byte_fallback:
        if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>' &&
            hex_value(text[3]) >= 0 && hex_value(text[4]) >= 0) {
          text = std::string(1, static_cast<char>(hex_value(text[3]) * 16 + hex_value(text[4])));
          byte_fallback = true;
        }
        break;
    }
  }
  return text;
}

}  // namespace conveyor::tokenizers::hf
