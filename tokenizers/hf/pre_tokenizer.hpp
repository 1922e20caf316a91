// tokenizer.json "pre_tokenizer": splits a normalized piece of text into the words that the BPE
// model encodes one by one (ByteLevel with GPT-2's regex, Split with a pattern, Metaspace,
// Sequence).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/error.hpp"
#include "tokenizers/hf/regex.hpp"

namespace conveyor::tokenizers::hf {

/// A non-owning reference to a callable taking one word (the word is only valid during the call).
class word_sink {
 public:
  template <class F>
  word_sink(F& f)  // NOLINT: implicit on purpose, as std::function_ref
      : object_(&f), call_([](void* o, std::string_view w) { (*static_cast<F*>(o))(w); }) {}
  void operator()(std::string_view word) const { call_(object_, word); }

 private:
  void* object_;
  void (*call_)(void*, std::string_view);
};

/// The pre-tokenization steps of a tokenizer.json, Sequences flattened; immutable after parsing.
class pre_tokenizer {
 public:
  /// Parses the "pre_tokenizer" value (null: the whole piece is one word). Errors name `origin`
  /// and the unsupported type or field.
  static expected<pre_tokenizer> parse(const nlohmann::json& value, const std::string& origin);

  /// Splits `piece` into words, calling `emit` for each non-empty one in order. `at_text_start`
  /// says the piece begins the encoded text (Metaspace's prepend_scheme "first"). Words are raw
  /// bytes: a ByteLevel step leaves the mapping to byte-level characters to the model. Fails
  /// (ec::bad_request, naming the file) when a regex cannot finish its search; the words
  /// emitted before stand for a part of the piece only.
  expected<void> split(std::string_view piece, bool at_text_start, word_sink emit) const;

  /// Whether a ByteLevel step is present (it must be the last one).
  bool byte_level() const { return byte_level_; }

 private:
  enum class kind { byte_level, metaspace, split };
  enum class behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
  struct step {
    kind what = kind::split;
    // byte_level: add_prefix_space; metaspace: prepend (always or first), split on replacement
    bool add_prefix_space = false;
    bool prepend_first_only = false;
    bool split_words = false;
    std::string literal;             // split: a String pattern; metaspace: the replacement
    std::shared_ptr<regex> pattern;  // split: a Regex pattern; byte_level: GPT-2's
    behavior how = behavior::isolated;
    bool invert = false;
  };
  static expected<void> add(const nlohmann::json& value, const std::string& origin,
                            std::vector<step>& steps);
  expected<void> run(size_t index, std::string_view piece, bool at_start, word_sink emit) const;
  expected<void> split_by(const step& s, std::string_view piece, bool at_start, size_t next,
                          word_sink emit) const;

  std::vector<step> steps_;
  bool byte_level_ = false;
};

}  // namespace conveyor::tokenizers::hf
