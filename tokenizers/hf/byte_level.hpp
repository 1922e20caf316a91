// GPT-2's byte-level alphabet: every byte as a printable Unicode character ("Ġ" for a space),
// and back.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace conveyor::tokenizers::hf {

/// GPT-2's pre-tokenizer regex (the ByteLevel pre-tokenizer with use_regex).
inline constexpr std::string_view gpt2_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// The UTF-8 of the character that stands for `byte`.
const std::string& byte_to_char(uint8_t byte);

/// Maps the characters of a byte-level token back to bytes into `out`; returns false (and
/// leaves `out` unspecified) when a character is not in the alphabet.
bool chars_to_bytes(std::string_view token, std::string& out);

/// Maps raw bytes to their byte-level characters.
std::string bytes_to_chars(std::string_view bytes);

}  // namespace conveyor::tokenizers::hf
