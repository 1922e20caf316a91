// tokenizer.json "normalizer": the text changes applied to each piece between added tokens
// before pre-tokenization (Prepend, Replace, NFC/NFD/NFKC/NFKD, Sequence).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/error.hpp"
#include "tokenizers/hf/regex.hpp"

namespace conveyor::tokenizers::hf {

/// A chain of normalization steps; immutable after parsing.
class normalizer {
 public:
  /// Parses the "normalizer" value (null gives a normalizer that changes nothing); errors name
  /// `origin` (the file) and the unsupported type.
  static expected<normalizer> parse(const nlohmann::json& value, const std::string& origin);

  /// Normalizes one piece of text (valid UTF-8) in place. Fails (ec::bad_request, naming the
  /// file) when a Replace regex cannot finish its search or ICU cannot normalize the text.
  expected<void> apply(std::string& text) const;

  /// Whether apply() changes nothing.
  bool empty() const { return steps_.empty(); }

 private:
  enum class kind { prepend, replace_string, replace_regex, nfc, nfd, nfkc, nfkd };
  struct step {
    kind what;
    std::string pattern;  // prepend: the prefix; replace_string: what to replace
    std::string content;  // replace: the replacement
    std::shared_ptr<regex> pattern_regex;
  };
  static expected<void> add(const nlohmann::json& value, const std::string& origin,
                            std::vector<step>& steps);
  std::vector<step> steps_;
  std::string origin_;
};

/// Unicode normalization form `form` ("NFC", "NFD", "NFKC", "NFKD") of `text` (valid UTF-8)
/// through ICU, however much longer it is. Fails (ec::bad_request) only when ICU cannot: a text
/// over 2 GiB, no memory.
expected<std::string> unicode_normalize(const std::string& text, const char* form);

}  // namespace conveyor::tokenizers::hf
