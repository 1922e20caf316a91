// The tokenizer.json normalizers Conveyor supports; Unicode normalization forms through ICU.
#include "tokenizers/hf/normalizer.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <nlohmann/json.hpp>

#include "common/text.hpp"

namespace conveyor::tokenizers::hf {

namespace {

constexpr const char* supported_normalizers = "Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD";

const UNormalizer2* instance(const char* form, UErrorCode& status) {
  if (std::strcmp(form, "NFC") == 0) return unorm2_getNFCInstance(&status);
  if (std::strcmp(form, "NFD") == 0) return unorm2_getNFDInstance(&status);
  if (std::strcmp(form, "NFKC") == 0) return unorm2_getNFKCInstance(&status);
  return unorm2_getNFKDInstance(&status);
}

/// Reads the {"String": s} or {"Regex": r} pattern of a Replace or Split.
bool read_pattern(const nlohmann::json& value, std::string& text, bool& is_regex) {
  if (!value.is_object()) return false;
  if (auto it = value.find("String"); it != value.end() && it->is_string()) {
    text = it->get<std::string>();
    is_regex = false;
    return !text.empty();
  }
  if (auto it = value.find("Regex"); it != value.end() && it->is_string()) {
    text = it->get<std::string>();
    is_regex = true;
    return true;
  }
  return false;
}

}  // namespace

expected<std::string> unicode_normalize(const std::string& text, const char* form) {
  bool ascii = true;
  for (unsigned char c : text) ascii = ascii && c < 0x80;
  if (ascii) return text;  // every ASCII string is in all four forms
  const auto failed = [&](const char* why) {
    return make_error(ec::bad_request, std::string{form} + " cannot normalize a text of " +
                                           std::to_string(text.size()) + " bytes (ICU: " + why +
                                           ")");
  };
  // ICU counts in int32_t.
  constexpr int64_t most = std::numeric_limits<int32_t>::max();
  if (static_cast<int64_t>(text.size()) >= most) return failed("over 2 GiB");
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* norm = instance(form, status);
  if (U_FAILURE(status) || norm == nullptr) return failed(u_errorName(status));
  std::u16string wide(text.size() + 1, u'\0');
  int32_t wide_length = 0;
  u_strFromUTF8(reinterpret_cast<UChar*>(wide.data()), static_cast<int32_t>(wide.size()),
                &wide_length, text.data(), static_cast<int32_t>(text.size()), &status);
  if (U_FAILURE(status)) return failed(u_errorName(status));
  wide.resize(static_cast<size_t>(wide_length));
  if (unorm2_isNormalized(norm, reinterpret_cast<const UChar*>(wide.data()), wide_length,
                          &status) &&
      U_SUCCESS(status))
    return text;
  // The normal form may be much longer than the text (NFD makes four characters of U+1F82, NFKC
  // and NFKD eighteen of U+FDFA): a first guess, then exactly the length ICU says it needs.
  const auto normalize_into = [&](std::u16string& out) {
    status = U_ZERO_ERROR;
    return unorm2_normalize(norm, reinterpret_cast<const UChar*>(wide.data()), wide_length,
                            reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()),
                            &status);
  };
  std::u16string normalized(wide.size() + wide.size() / 2 + 8, u'\0');
  int32_t n = normalize_into(normalized);
  if (status == U_BUFFER_OVERFLOW_ERROR) {
    normalized.assign(static_cast<size_t>(n), u'\0');
    n = normalize_into(normalized);
  }
  if (U_FAILURE(status)) return failed(u_errorName(status));
  // At most three bytes per UTF-16 unit; a result over 2 GiB fails with an overflow.
  std::string out(static_cast<size_t>(std::min<int64_t>(int64_t{n} * 3, most)), '\0');
  int32_t out_length = 0;
  status = U_ZERO_ERROR;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &out_length,
              reinterpret_cast<const UChar*>(normalized.data()), n, &status);
  if (U_FAILURE(status)) return failed(u_errorName(status));
  out.resize(static_cast<size_t>(out_length));
  return out;
}

expected<void> normalizer::add(const nlohmann::json& value, const std::string& origin,
                               std::vector<step>& steps) {
  if (value.is_null()) return {};
  if (!value.is_object() || !value.contains("type") || !value["type"].is_string())
    return make_error(ec::bad_file,
                      origin + ": normalizer must be null or an object with a 'type'");
  const auto type = value["type"].get<std::string>();
  if (type == "Sequence") {
    auto list = value.find("normalizers");
    if (list == value.end() || !list->is_array())
      return make_error(ec::bad_file, origin + ": normalizer Sequence needs a 'normalizers' list");
    for (const auto& item : *list)
      if (auto ok = add(item, origin, steps); !ok) return ok;
    return {};
  }
  if (type == "Prepend") {
    auto p = value.find("prepend");
    if (p == value.end() || !p->is_string())
      return make_error(ec::bad_file, origin + ": normalizer Prepend needs a string 'prepend'");
    steps.push_back({kind::prepend, p->get<std::string>(), {}, nullptr});
    return {};
  }
  if (type == "Replace") {
    std::string pattern;
    bool is_regex = false;
    auto content = value.find("content");
    if (!value.contains("pattern") || !read_pattern(value["pattern"], pattern, is_regex) ||
        content == value.end() || !content->is_string())
      return make_error(ec::bad_file, origin +
                                          ": normalizer Replace needs a 'pattern' ({\"String\"} "
                                          "or {\"Regex\"}) and a string 'content'");
    step s{is_regex ? kind::replace_regex : kind::replace_string, pattern,
           content->get<std::string>(), nullptr};
    if (is_regex) {
      auto re = regex::compile(pattern, origin + ": normalizer Replace");
      if (!re) return re.error();
      s.pattern_regex = std::make_shared<regex>(std::move(*re));
    }
    steps.push_back(std::move(s));
    return {};
  }
  if (type == "NFC") return steps.push_back({kind::nfc, {}, {}, nullptr}), expected<void>{};
  if (type == "NFD") return steps.push_back({kind::nfd, {}, {}, nullptr}), expected<void>{};
  if (type == "NFKC") return steps.push_back({kind::nfkc, {}, {}, nullptr}), expected<void>{};
  if (type == "NFKD") return steps.push_back({kind::nfkd, {}, {}, nullptr}), expected<void>{};
  return make_error(ec::bad_file, origin + ": normalizer type '" + type +
                                      "' is not supported; supported: " + supported_normalizers);
}

expected<normalizer> normalizer::parse(const nlohmann::json& value, const std::string& origin) {
  normalizer out;
  if (auto ok = add(value, origin, out.steps_); !ok) return ok.error();
  out.origin_ = origin;
  return out;
}

expected<void> normalizer::apply(std::string& text) const {
  const auto normal_form = [&](const char* form) -> expected<void> {
    auto normalized = unicode_normalize(text, form);
    if (!normalized)
      return make_error(ec::bad_request,
                        origin_ + ": normalizer " + message_of(normalized.error()));
    text = std::move(*normalized);
    return {};
  };
  for (const auto& s : steps_) {
    expected<void> ok;
    switch (s.what) {
      case kind::prepend:
        if (!text.empty()) text.insert(0, s.pattern);
        break;
      case kind::replace_string:
        replace_all(text, s.pattern, s.content);
        break;
      case kind::replace_regex: {
        std::string out;
        size_t last = 0;
        size_t begin = 0;
        size_t end = 0;
        for (size_t at = 0; at <= text.size();) {
          auto found = s.pattern_regex->find(text, at, begin, end);
          if (!found) return found.error();
          if (!*found) break;
          out.append(text, last, begin - last);
          out += s.content;
          last = end;
          at = end > begin ? end : end + 1;
          // Step over a whole character after an empty match.
          while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
        }
        out.append(text, last, std::string::npos);
        text.swap(out);
        break;
      }
      case kind::nfc:
        ok = normal_form("NFC");
        break;
      case kind::nfd:
        ok = normal_form("NFD");
        break;
      case kind::nfkc:
        ok = normal_form("NFKC");
        break;
      case kind::nfkd:
        ok = normal_form("NFKD");
        break;
    }
    if (!ok) return ok;
  }
  return {};
}

}  // namespace conveyor::tokenizers::hf
