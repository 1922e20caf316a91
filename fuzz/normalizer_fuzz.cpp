// Fuzz target: the tokenizer.json normalizers on arbitrary text. The first byte picks one (NFC,
// NFD, NFKC, NFKD, or a Sequence as published tokenizers write them), the second repeats the
// text up to 64 times (long runs of characters whose normal form is longer), the rest is the
// text, made UTF-8 as the tokenizer makes it. No error on such short texts, the result is UTF-8
// and in the normalization form that ends the normalizer (ICU's own check), and a form alone
// leaves its result as it is.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_support.hpp"
#include "tokenizers/hf/normalizer.hpp"
#include "tokenizers/utf8.hpp"

namespace {

using conveyor::tokenizers::hf::normalizer;

/// A normalizer, the normalization form its result must be in ("" when none), and whether it is
/// that form alone (then it leaves its own result as it is).
struct candidate {
  normalizer norm;
  std::string form;
  bool form_alone;
};

std::vector<candidate> make_all() {
  using nlohmann::json;
  const std::pair<const char*, const char*> specs[] = {
      {R"({"type": "NFC"})", "NFC"},
      {R"({"type": "NFD"})", "NFD"},
      {R"({"type": "NFKC"})", "NFKC"},
      {R"({"type": "NFKD"})", "NFKD"},
      // Accents stripped after NFKD (BERT-like), then NFC again.
      {R"({"type": "Sequence", "normalizers": [{"type": "NFKD"},
           {"type": "Replace", "pattern": {"Regex": "\\p{Mn}+"}, "content": ""},
           {"type": "NFC"}]})",
       "NFC"},
      // Llama 2's older layout.
      {R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
           {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})",
       ""},
      // Whitespace runs folded after NFKC, then NFKD.
      {R"({"type": "Sequence", "normalizers": [{"type": "NFKC"},
           {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, {"type": "NFKD"}]})",
       "NFKD"},
  };
  std::vector<candidate> all;
  for (const auto& [spec, form] : specs) {
    auto parsed = normalizer::parse(json::parse(spec), "normalizer_fuzz");
    if (!parsed) {
      std::fprintf(stderr, "normalizer_fuzz: %s\n", conveyor::message_of(parsed.error()).c_str());
      std::abort();
    }
    all.push_back(
        {std::move(*parsed), form, std::string{spec}.find("Sequence") == std::string::npos});
  }
  return all;
}

const UNormalizer2* icu_form(const std::string& form) {
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* n = form == "NFC"    ? unorm2_getNFCInstance(&status)
                          : form == "NFD"  ? unorm2_getNFDInstance(&status)
                          : form == "NFKC" ? unorm2_getNFKCInstance(&status)
                                           : unorm2_getNFKDInstance(&status);
  if (U_FAILURE(status) || n == nullptr) std::abort();
  return n;
}

/// Aborts unless `text` (UTF-8) is in normalization form `form`, by ICU's check on UTF-16.
void require_normalized(const std::string& text, const std::string& form) {
  UErrorCode status = U_ZERO_ERROR;
  std::u16string wide(text.size() + 1, u'\0');
  int32_t length = 0;
  u_strFromUTF8(reinterpret_cast<UChar*>(wide.data()), static_cast<int32_t>(wide.size()), &length,
                text.data(), static_cast<int32_t>(text.size()), &status);
  if (U_FAILURE(status)) std::abort();
  const bool normalized = unorm2_isNormalized(
      icu_form(form), reinterpret_cast<const UChar*>(wide.data()), length, &status);
  if (U_FAILURE(status) || !normalized) {
    std::fprintf(stderr, "a text of %zu bytes is not in %s after normalizing\n", text.size(),
                 form.c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  static const auto all = make_all();
  if (size < 2) return 0;
  const auto& c = all[data[0] % all.size()];
  std::string bytes{reinterpret_cast<const char*>(data + 2), size - 2};
  std::string text = tokenizers::drain_utf8(bytes, true);
  const std::string once = text;
  for (int i = data[1] % 64; i > 0; --i) text += once;
  if (auto ok = c.norm.apply(text); !ok) {
    std::fprintf(stderr, "normalizer_fuzz: %s\n", message_of(ok.error()).c_str());
    std::abort();
  }
  fuzz::require_utf8(text, "the normalized text");
  if (c.form.empty()) return 0;
  require_normalized(text, c.form);
  if (!c.form_alone) return 0;
  // A text in the form stays as it is.
  std::string again = text;
  if (!c.norm.apply(again) || again != text) std::abort();
  return 0;
}
