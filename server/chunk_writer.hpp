// Stream chunks written straight into an output string, without building JSON objects: the
// per-token path of a streamed completion. The bytes are exactly what nlohmann::json's
// `dump(-1, ' ', false, replace)` of the same object gives (keys in its sorted order, invalid
// UTF-8 replaced by U+FFFD as it does), so clients see no difference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/backend.hpp"

namespace conveyor::server {

struct completion_meta;
enum class api_kind;

namespace detail {

/// Appends `text` as a JSON string literal (quotes included): `"`, `\` and control characters
/// escaped as nlohmann::json escapes them, other bytes as they are; each invalid or incomplete
/// UTF-8 sequence becomes U+FFFD exactly where nlohmann::json's `replace` handler puts it.
void append_json_string(std::string& out, std::string_view text);

/// What ends every stream chunk of a response: `,"created":N,"id":"...","model":"...",
/// "object":"..."}` (`meta`'s fields, the same for each of its chunks, so rendered once).
std::string render_chunk_tail(const completion_meta& meta);

/// Appends a stream chunk of choice `index` without log-probabilities (see `render_chunk`).
void append_plain_chunk(std::string& out, const completion_meta& meta, std::size_t index,
                        std::string_view text, std::optional<std::string_view> finish_reason);

/// As above with `meta`'s kind and its tail from `render_chunk_tail`.
void append_plain_chunk(std::string& out, api_kind kind, std::string_view tail, std::size_t index,
                        std::string_view text, std::optional<std::string_view> finish_reason);

/// Appends a chat stream's first chunk of choice `index` (see `render_role_chunk`).
void append_role_chunk(std::string& out, const completion_meta& meta, std::size_t index);

/// Appends the usage chunk (see `render_usage_chunk`).
void append_usage_chunk(std::string& out, const completion_meta& meta, completion_usage usage);

}  // namespace detail

}  // namespace conveyor::server
