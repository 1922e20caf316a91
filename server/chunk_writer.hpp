// The stream chunks of a completion, written straight into an output string without building
// JSON objects (only a chunk's log-probabilities are one: openai.hpp's `render_logprobs`). The
// bytes are exactly what nlohmann::json's `dump(-1, ' ', false, replace)` of the same object
// gives (keys in its sorted order, invalid UTF-8 replaced by U+FFFD as it does), as the whole
// answers and errors that openai.hpp renders with it are written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/backend.hpp"

namespace conveyor::server {

struct completion_meta;
struct logprobs_part;
enum class api_kind;

namespace detail {

/// Appends `text` as a JSON string literal (quotes included): `"`, `\` and control characters
/// escaped as nlohmann::json escapes them, other bytes as they are; each invalid or incomplete
/// UTF-8 sequence becomes U+FFFD exactly where nlohmann::json's `replace` handler puts it.
void append_json_string(std::string& out, std::string_view text);

/// Writes the stream chunks of one response into the caller's buffer. What ends each of them
/// (`,"created":N,"id":"...","model":"...","object":"..."}`, the response's `completion_meta`)
/// is rendered once, when the writer is made.
class chunk_writer {
 public:
  /// A writer of the chunks of the response `meta`.
  explicit chunk_writer(const completion_meta& meta);

  /// Appends a chunk of choice `index`: `finish_reason` null while the choice runs. For chat
  /// the text is the `delta`'s content (an empty delta on the last chunk when `text` is empty).
  /// `logprobs`, when given and not empty, are the log-probabilities of the chunk's tokens
  /// (`render_logprobs`); otherwise the chunk's `logprobs` is null.
  void append_chunk(std::string& out, std::size_t index, std::string_view text,
                    std::optional<std::string_view> finish_reason,
                    const logprobs_part* logprobs = nullptr) const;

  /// Appends a chat chunk of choice `index` whose delta is a piece of tool call `call`
  /// (OpenAI's `delta.tool_calls` [{index: call, ...}]): the call's first chunk carries `id`,
  /// type "function", the function's `name` and the first piece of its `arguments` (maybe
  /// empty); the others (`id` empty) carry only the next piece of the arguments. `logprobs` as
  /// append_chunk's.
  void append_tool_call_chunk(std::string& out, std::size_t index, std::size_t call,
                              std::string_view id, std::string_view name,
                              std::string_view arguments,
                              const logprobs_part* logprobs = nullptr) const;

  /// Appends a chat stream's first chunk of choice `index`: delta {role: "assistant",
  /// content: ""}.
  void append_role_chunk(std::string& out, std::size_t index) const;

  /// Appends the last chunk of `stream_options.include_usage`: no choices, the usage.
  void append_usage_chunk(std::string& out, completion_usage usage) const;

 private:
  api_kind kind_;
  std::string tail_;
};

}  // namespace detail

}  // namespace conveyor::server
