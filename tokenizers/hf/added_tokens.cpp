// Matching added tokens as the tokenizers library's AddedVocabulary does.
#include "tokenizers/hf/added_tokens.hpp"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "tokenizers/utf8.hpp"

namespace conveyor::tokenizers::hf {

namespace {

/// The length of the whitespace character ending at `end` (0 if none): ASCII whitespace and the
/// common Unicode spaces.
size_t whitespace_before(std::string_view text, size_t end) {
  if (end == 0) return 0;
  const auto c = static_cast<unsigned char>(text[end - 1]);
  if (c == ' ' || (c >= '\t' && c <= '\r')) return 1;
  for (std::string_view space : {"\u00A0", "\u3000", "\u2002", "\u2003", "\u2009", "\u0085"})
    if (end >= space.size() && text.substr(end - space.size(), space.size()) == space)
      return space.size();
  return 0;
}

size_t whitespace_after(std::string_view text, size_t begin) {
  if (begin >= text.size()) return 0;
  const auto c = static_cast<unsigned char>(text[begin]);
  if (c == ' ' || (c >= '\t' && c <= '\r')) return 1;
  for (std::string_view space : {"\u00A0", "\u3000", "\u2002", "\u2003", "\u2009", "\u0085"})
    if (text.substr(begin, space.size()) == space) return space.size();
  return 0;
}

/// Whether the character before `end` / at `begin` is a word character (alphanumeric or '_';
/// every non-ASCII character counts as one).
bool word_char_before(std::string_view text, size_t end) {
  if (end == 0) return false;
  const auto c = static_cast<unsigned char>(text[end - 1]);
  return c >= 0x80 || std::isalnum(c) != 0 || c == '_';
}

bool word_char_at(std::string_view text, size_t begin) {
  if (begin >= text.size()) return false;
  const auto c = static_cast<unsigned char>(text[begin]);
  return c >= 0x80 || std::isalnum(c) != 0 || c == '_';
}

}  // namespace

added_token_matcher::added_token_matcher(std::vector<added_token> tokens) {
  for (auto& t : tokens)
    if (!t.content.empty()) tokens_.push_back(std::move(t));
  for (uint32_t i = 0; i < tokens_.size(); ++i)
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  for (auto& list : by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
}

const added_token* added_token_matcher::match_at(std::string_view text, size_t& pos,
                                                 size_t plain_begin, size_t& begin,
                                                 size_t& end) const {
  const auto& candidates = by_first_byte_[static_cast<unsigned char>(text[pos])];
  for (uint32_t index : candidates) {
    const auto& token = tokens_[index];
    if (text.compare(pos, token.content.size(), token.content) != 0) continue;
    begin = pos;
    end = pos + token.content.size();
    if (token.single_word && (word_char_before(text, begin) || word_char_at(text, end))) {
      // The longest match is taken and then refused: its text stays plain.
      pos = end - 1;
      return nullptr;
    }
    if (token.lstrip)
      for (size_t n; begin > plain_begin && (n = whitespace_before(text, begin)) > 0;) begin -= n;
    if (token.rstrip)
      for (size_t n; (n = whitespace_after(text, end)) > 0;) end += n;
    return &token;
  }
  return nullptr;
}

expected<std::vector<added_token>> parse_added_tokens(const nlohmann::json& value,
                                                      const std::string& origin) {
  std::vector<added_token> out;
  if (value.is_null()) return out;
  if (!value.is_array())
    return make_error(ec::bad_file, origin + ": 'added_tokens' must be a list");
  for (size_t i = 0; i < value.size(); ++i) {
    const auto& item = value[i];
    const auto where = origin + ": added_tokens[" + std::to_string(i) + "]";
    if (!item.is_object() || !item.contains("id") || !item["id"].is_number_integer() ||
        !item.contains("content") || !item["content"].is_string())
      return make_error(ec::bad_file, where + " needs an integer 'id' and a string 'content'");
    added_token t;
    const auto id = item["id"].get<int64_t>();
    if (id < 0 || id > (1 << 24))
      return make_error(ec::bad_file, where + " has an id out of range");
    t.id = static_cast<int32_t>(id);
    t.content = item["content"].get<std::string>();
    if (t.content.empty()) return make_error(ec::bad_file, where + " has an empty 'content'");
    const auto flag = [&](const char* key, bool fallback) {
      auto it = item.find(key);
      return it != item.end() && it->is_boolean() ? it->get<bool>() : fallback;
    };
    t.special = flag("special", false);
    t.single_word = flag("single_word", false);
    t.lstrip = flag("lstrip", false);
    t.rstrip = flag("rstrip", false);
    t.normalized = flag("normalized", !t.special);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace conveyor::tokenizers::hf
