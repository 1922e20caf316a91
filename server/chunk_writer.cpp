// Stream chunks written straight into an output string, byte for byte as nlohmann::json dumps them.
#include "server/chunk_writer.hpp"

#include <charconv>

#include "server/openai.hpp"

namespace conveyor::server::detail {

namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD

// Whether byte `b` may follow lead byte `lead` as the first continuation byte (Unicode's table
// of well-formed UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF).
bool second_byte_ok(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

// Continuation bytes after a valid lead byte; -1 for a byte that cannot start a character.
int continuation_bytes(unsigned char lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return 1;
  if (lead >= 0xE0 && lead <= 0xEF) return 2;
  if (lead >= 0xF0 && lead <= 0xF4) return 3;
  return -1;
}

template <class Int>
void append_integer(std::string& out, Int value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  (void)ec;
  out.append(buf, end);
}

// `,"created":N,"id":"...","model":"...","object":"..."}`: what follows "choices" in a chunk.
void append_meta_tail(std::string& out, const completion_meta& meta) {
  out += ",\"created\":";
  append_integer(out, meta.created);
  out += ",\"id\":";
  append_json_string(out, meta.id);
  out += ",\"model\":";
  append_json_string(out, meta.model);
  out += meta.kind == api_kind::chat_completions ? ",\"object\":\"chat.completion.chunk\"}"
                                                 : ",\"object\":\"text_completion\"}";
}

void append_finish_reason(std::string& out, std::optional<std::string_view> finish_reason) {
  out += "\"finish_reason\":";
  if (finish_reason)
    append_json_string(out, *finish_reason);
  else
    out += "null";
}

// `,"logprobs":...`: the chunk's tokens' log-probabilities, null when there are none.
void append_logprobs(std::string& out, api_kind kind, const logprobs_part* logprobs) {
  out += ",\"logprobs\":";
  if (logprobs && !logprobs->tokens.empty())
    out += render_logprobs(kind, *logprobs);
  else
    out += "null";
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  out.reserve(out.size() + text.size() + 2);
  out += '"';
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    // A run of bytes that are written as they are.
    std::size_t run = i;
    while (run < n) {
      auto c = static_cast<unsigned char>(text[run]);
      if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) break;
      ++run;
    }
    out.append(text.data() + i, run - i);
    i = run;
    if (i == n) break;
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\t': out += "\\t"; break;
        case '\n': out += "\\n"; break;
        case '\f': out += "\\f"; break;
        case '\r': out += "\\r"; break;
        default: {
          const char esc[] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xf]};
          out.append(esc, sizeof(esc));
        }
      }
      ++i;
      continue;
    }
    const int more = continuation_bytes(c);
    if (more < 0) {
      // Not a lead byte: replaced, and the next byte starts afresh.
      out += replacement;
      ++i;
      continue;
    }
    // Check the continuation bytes; the first that does not fit is read again as a start.
    std::size_t j = i + 1;
    bool ok = true;
    for (int k = 0; k < more; ++k, ++j) {
      if (j == n) {
        // The text ends inside a character: replaced, as nlohmann::json does at the end.
        out += replacement;
        out += '"';
        return;
      }
      const auto b = static_cast<unsigned char>(text[j]);
      if (k == 0 ? !second_byte_ok(c, b) : (b < 0x80 || b > 0xBF)) {
        ok = false;
        break;
      }
    }
    if (ok) {
      out.append(text.data() + i, j - i);
    } else {
      out += replacement;
    }
    i = j;
  }
  out += '"';
}

chunk_writer::chunk_writer(const completion_meta& meta) : kind_(meta.kind) {
  append_meta_tail(tail_, meta);
}

void chunk_writer::append_chunk(std::string& out, std::size_t index, std::string_view text,
                                std::optional<std::string_view> finish_reason,
                                const logprobs_part* logprobs) const {
  out += "{\"choices\":[{";
  if (kind_ == api_kind::chat_completions) {
    if (text.empty() && finish_reason) {
      out += "\"delta\":{},";
    } else {
      out += "\"delta\":{\"content\":";
      append_json_string(out, text);
      out += "},";
    }
    append_finish_reason(out, finish_reason);
    out += ",\"index\":";
    append_integer(out, index);
    append_logprobs(out, kind_, logprobs);
    out += "}]";
  } else {
    append_finish_reason(out, finish_reason);
    out += ",\"index\":";
    append_integer(out, index);
    append_logprobs(out, kind_, logprobs);
    out += ",\"text\":";
    append_json_string(out, text);
    out += "}]";
  }
  out += tail_;
}

void chunk_writer::append_tool_call_chunk(std::string& out, std::size_t index, std::size_t call,
                                          std::string_view id, std::string_view name,
                                          std::string_view arguments,
                                          const logprobs_part* logprobs) const {
  // Keys in nlohmann::json's sorted order: function {arguments, name}, id, index, type.
  out += "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":";
  append_json_string(out, arguments);
  if (!id.empty()) {
    out += ",\"name\":";
    append_json_string(out, name);
    out += "},\"id\":";
    append_json_string(out, id);
    out += ",\"index\":";
    append_integer(out, call);
    out += ",\"type\":\"function\"}]},";
  } else {
    out += "},\"index\":";
    append_integer(out, call);
    out += "}]},";
  }
  append_finish_reason(out, std::nullopt);
  out += ",\"index\":";
  append_integer(out, index);
  append_logprobs(out, kind_, logprobs);
  out += "}]";
  out += tail_;
}

void chunk_writer::append_role_chunk(std::string& out, std::size_t index) const {
  out += "{\"choices\":[{\"delta\":{\"content\":\"\",\"role\":\"assistant\"},"
         "\"finish_reason\":null,\"index\":";
  append_integer(out, index);
  out += ",\"logprobs\":null}]";
  out += tail_;
}

void chunk_writer::append_usage_chunk(std::string& out, completion_usage usage) const {
  out += "{\"choices\":[]";
  out.append(tail_, 0, tail_.size() - 1);  // without the closing brace: the usage follows
  out += ",\"usage\":{\"completion_tokens\":";
  append_integer(out, usage.completion_tokens);
  out += ",\"prompt_tokens\":";
  append_integer(out, usage.prompt_tokens);
  out += ",\"prompt_tokens_details\":{\"cached_tokens\":";
  append_integer(out, usage.cached_tokens);
  out += "},\"total_tokens\":";
  append_integer(out, int64_t{usage.prompt_tokens} + usage.completion_tokens);
  out += "}}";
}

}  // namespace conveyor::server::detail
