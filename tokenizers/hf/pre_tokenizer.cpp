// The tokenizer.json pre-tokenizers Conveyor supports, with the semantics of the tokenizers
// library (split behaviours, Metaspace's prepend scheme, ByteLevel's prefix space).
#include "tokenizers/hf/pre_tokenizer.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/text.hpp"
#include "tokenizers/hf/byte_level.hpp"

namespace conveyor::tokenizers::hf {

namespace {

constexpr const char* supported_pre_tokenizers = "ByteLevel, Metaspace, Split, Sequence";

/// One stretch of a piece: [begin, end) and whether the pattern matched it.
struct stretch {
  size_t begin;
  size_t end;
  bool is_match;
};

bool flag(const nlohmann::json& value, const char* key, bool fallback) {
  auto it = value.find(key);
  return it != value.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

}  // namespace

expected<void> pre_tokenizer::add(const nlohmann::json& value, const std::string& origin,
                                  std::vector<step>& steps) {
  if (value.is_null()) return {};
  if (!value.is_object() || !value.contains("type") || !value["type"].is_string())
    return make_error(ec::bad_file,
                      origin + ": pre_tokenizer must be null or an object with a 'type'");
  const auto type = value["type"].get<std::string>();
  if (!steps.empty() && steps.back().what == kind::byte_level)
    return make_error(ec::bad_file, origin + ": pre_tokenizer " + type +
                                        " after ByteLevel is not supported (ByteLevel must be "
                                        "the last step)");
  if (type == "Sequence") {
    auto list = value.find("pretokenizers");
    if (list == value.end() || !list->is_array())
      return make_error(ec::bad_file,
                        origin + ": pre_tokenizer Sequence needs a 'pretokenizers' list");
    for (const auto& item : *list)
      if (auto ok = add(item, origin, steps); !ok) return ok;
    return {};
  }
  if (type == "ByteLevel") {
    step s;
    s.what = kind::byte_level;
    s.add_prefix_space = flag(value, "add_prefix_space", true);
    if (flag(value, "use_regex", true)) {
      auto re = regex::compile(std::string{gpt2_pattern}, origin + ": pre_tokenizer ByteLevel");
      if (!re) return re.error();
      s.pattern = std::make_shared<regex>(std::move(*re));
    }
    steps.push_back(std::move(s));
    return {};
  }
  if (type == "Metaspace") {
    step s;
    s.what = kind::metaspace;
    auto replacement = value.find("replacement");
    if (replacement == value.end() || !replacement->is_string() ||
        replacement->get<std::string>().empty())
      return make_error(ec::bad_file,
                        origin + ": pre_tokenizer Metaspace needs a non-empty 'replacement'");
    s.literal = replacement->get<std::string>();
    std::string scheme = flag(value, "add_prefix_space", true) ? "always" : "never";
    if (auto it = value.find("prepend_scheme"); it != value.end() && it->is_string())
      scheme = it->get<std::string>();
    if (scheme != "always" && scheme != "first" && scheme != "never")
      return make_error(ec::bad_file, origin + ": pre_tokenizer Metaspace prepend_scheme '" +
                                          scheme + "' is not one of always, first, never");
    s.add_prefix_space = scheme != "never";
    s.prepend_first_only = scheme == "first";
    s.split_words = flag(value, "split", true);
    steps.push_back(std::move(s));
    return {};
  }
  if (type == "Split") {
    step s;
    s.what = kind::split;
    auto pattern = value.find("pattern");
    const std::string bad_pattern =
        origin + ": pre_tokenizer Split needs a 'pattern' ({\"String\"} or {\"Regex\"})";
    if (pattern == value.end() || !pattern->is_object())
      return make_error(ec::bad_file, bad_pattern);
    if (auto it = pattern->find("String");
        it != pattern->end() && it->is_string() && !it->get<std::string>().empty()) {
      s.literal = it->get<std::string>();
    } else if (auto re_text = pattern->find("Regex");
               re_text != pattern->end() && re_text->is_string()) {
      auto re = regex::compile(re_text->get<std::string>(), origin + ": pre_tokenizer Split");
      if (!re) return re.error();
      s.pattern = std::make_shared<regex>(std::move(*re));
    } else {
      return make_error(ec::bad_file, bad_pattern);
    }
    const std::string how = value.contains("behavior") && value["behavior"].is_string()
                                ? value["behavior"].get<std::string>()
                                : "";
    if (how == "Removed")
      s.how = behavior::removed;
    else if (how == "Isolated")
      s.how = behavior::isolated;
    else if (how == "MergedWithPrevious")
      s.how = behavior::merged_with_previous;
    else if (how == "MergedWithNext")
      s.how = behavior::merged_with_next;
    else if (how == "Contiguous")
      s.how = behavior::contiguous;
    else
      return make_error(ec::bad_file, origin + ": pre_tokenizer Split behavior '" + how +
                                          "' is not one of Removed, Isolated, MergedWithPrevious, "
                                          "MergedWithNext, Contiguous");
    s.invert = flag(value, "invert", false);
    steps.push_back(std::move(s));
    return {};
  }
  return make_error(ec::bad_file, origin + ": pre_tokenizer type '" + type +
                                      "' is not supported; supported: " + supported_pre_tokenizers);
}

expected<pre_tokenizer> pre_tokenizer::parse(const nlohmann::json& value,
                                             const std::string& origin) {
  pre_tokenizer out;
  if (auto ok = add(value, origin, out.steps_); !ok) return ok.error();
  out.byte_level_ = !out.steps_.empty() && out.steps_.back().what == kind::byte_level;
  return out;
}

expected<void> pre_tokenizer::split(std::string_view piece, bool at_text_start,
                                    word_sink emit) const {
  return run(0, piece, at_text_start, emit);
}

expected<void> pre_tokenizer::run(size_t index, std::string_view piece, bool at_start,
                                  word_sink emit) const {
  if (piece.empty()) return {};
  if (index == steps_.size()) {
    emit(piece);
    return {};
  }
  const step& s = steps_[index];
  switch (s.what) {
    case kind::byte_level: {
      if (s.add_prefix_space && piece.front() != ' ') {
        std::string prefixed;
        prefixed.reserve(piece.size() + 1);
        prefixed += ' ';
        prefixed += piece;
        if (s.pattern) return split_by(s, prefixed, at_start, index + 1, emit);
        return run(index + 1, prefixed, at_start, emit);
      }
      if (s.pattern) return split_by(s, piece, at_start, index + 1, emit);
      return run(index + 1, piece, at_start, emit);
    }
    case kind::metaspace: {
      std::string text{piece};
      replace_all(text, " ", s.literal);
      const bool starts_with = text.compare(0, s.literal.size(), s.literal) == 0;
      if (s.add_prefix_space && !starts_with && (!s.prepend_first_only || at_start))
        text.insert(0, s.literal);
      if (!s.split_words) return run(index + 1, text, at_start, emit);
      // MergedWithNext on the replacement: each word starts at a replacement character.
      size_t begin = 0;
      for (size_t pos = text.find(s.literal, 1); pos != std::string::npos;
           pos = text.find(s.literal, pos + s.literal.size())) {
        if (pos > begin) {
          auto ok = run(index + 1, std::string_view{text}.substr(begin, pos - begin),
                        at_start && begin == 0, emit);
          if (!ok) return ok;
        }
        begin = pos;
      }
      return run(index + 1, std::string_view{text}.substr(begin), at_start && begin == 0, emit);
    }
    case kind::split:
      return split_by(s, piece, at_start, index + 1, emit);
  }
  return {};
}

expected<void> pre_tokenizer::split_by(const step& s, std::string_view piece, bool at_start,
                                       size_t next, word_sink emit) const {
  const bool is_byte_level = s.what == kind::byte_level;
  const behavior how = is_byte_level ? behavior::isolated : s.how;
  // The common case (ByteLevel's regex, Split Isolated without invert) emits while matching.
  const bool streaming = how == behavior::isolated;
  std::vector<stretch> stretches;
  expected<void> later;  // the outcome of the later steps: their first error stops the split
  const auto add = [&](size_t begin, size_t end, bool is_match) {
    if (streaming) {
      if (end > begin && later)
        later = run(next, piece.substr(begin, end - begin), at_start && begin == 0, emit);
    } else {
      stretches.push_back({begin, end, s.invert ? !is_match : is_match});
    }
  };
  size_t prev = 0;
  if (s.pattern) {
    size_t begin = 0;
    size_t end = 0;
    for (size_t at = 0; at <= piece.size() && later;) {
      auto found = s.pattern->find(piece, at, begin, end);
      if (!found) return found.error();
      if (!*found) break;
      if (begin != prev) add(prev, begin, false);
      add(begin, end, true);
      prev = end;
      at = end > begin ? end : end + 1;
      while (at < piece.size() && (static_cast<unsigned char>(piece[at]) & 0xC0) == 0x80) ++at;
    }
  } else {
    for (size_t pos = piece.find(s.literal); pos != std::string_view::npos && later;
         pos = piece.find(s.literal, prev)) {
      if (pos != prev) add(prev, pos, false);
      add(pos, pos + s.literal.size(), true);
      prev = pos + s.literal.size();
    }
  }
  if (!later) return later;
  if (prev != piece.size()) add(prev, piece.size(), false);
  if (streaming) return later;

  std::vector<stretch> out;
  bool previous_match = false;
  switch (how) {
    case behavior::removed:
      for (const auto& st : stretches)
        if (!st.is_match) out.push_back(st);
      break;
    case behavior::isolated:
      out = stretches;
      break;
    case behavior::merged_with_previous:
      for (const auto& st : stretches) {
        if (st.is_match && !previous_match && !out.empty())
          out.back().end = st.end;
        else
          out.push_back(st);
        previous_match = st.is_match;
      }
      break;
    case behavior::merged_with_next:
      for (auto it = stretches.rbegin(); it != stretches.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty())
          out.back().begin = it->begin;
        else
          out.push_back(*it);
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
    case behavior::contiguous:
      for (const auto& st : stretches) {
        if (st.is_match == previous_match && !out.empty())
          out.back().end = st.end;
        else
          out.push_back(st);
        previous_match = st.is_match;
      }
      break;
  }
  for (const auto& st : out)
    if (st.end > st.begin) {
      auto ok =
          run(next, piece.substr(st.begin, st.end - st.begin), at_start && st.begin == 0, emit);
      if (!ok) return ok;
    }
  return {};
}

}  // namespace conveyor::tokenizers::hf
