// The llama2.c vocabulary loader and Conveyor's byte-fallback BPE encoder.
#include "tokenizers/llama2c_tokenizer.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>

#include "tokenizers/utf8.hpp"

namespace conveyor::tokenizers {

namespace {

/// Returns the byte that a byte-fallback piece "<0xHH>" stands for (upper-case hex, as
/// SentencePiece writes it), or nothing for any other piece.
std::optional<uint8_t> byte_of_spm_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int high = digit(piece[3]);
  const int low = digit(piece[4]);
  if (high < 0 || low < 0) return std::nullopt;
  return static_cast<uint8_t>(high * 16 + low);
}

/// Reads a little-endian 32-bit word at `pos` of `data`, which must hold 4 bytes there.
uint32_t read_u32(const std::string& data, size_t pos) {
  uint32_t x = 0;
  for (size_t i = 0; i < 4; ++i) x |= uint32_t{static_cast<uint8_t>(data[pos + i])} << (8 * i);
  return x;
}

/// Ids below this one are UNK, BOS and EOS.
constexpr int32_t first_non_control_id = 3;

}  // namespace

// -- construction --------------------------------------------------------------------------------

expected<std::shared_ptr<const llama2c_tokenizer>> llama2c_tokenizer::make(
    std::vector<std::string> pieces, std::vector<float> scores, const std::string& origin) {
  if (pieces.size() != scores.size())
    return make_error(ec::bad_file, origin + ": " + std::to_string(pieces.size()) + " pieces but " +
                                        std::to_string(scores.size()) + " scores");
  if (pieces.size() < static_cast<size_t>(first_non_control_id))
    return make_error(ec::bad_file, origin + ": " + std::to_string(pieces.size()) +
                                        " tokens, need at least UNK, BOS and EOS");
  std::array<int32_t, 256> byte_ids;
  byte_ids.fill(-1);
  for (size_t id = first_non_control_id; id < pieces.size(); ++id)
    if (auto b = byte_of_spm_piece(pieces[id]); b && byte_ids[*b] < 0)
      byte_ids[*b] = static_cast<int32_t>(id);
  for (size_t b = 0; b < byte_ids.size(); ++b) {
    if (byte_ids[b] < 0) {
      static constexpr char hex[] = "0123456789ABCDEF";
      return make_error(ec::bad_file, origin + ": no byte-fallback token <0x" + hex[b / 16] +
                                          hex[b % 16] + "> in the vocabulary");
    }
  }
  return std::shared_ptr<const llama2c_tokenizer>{
      new llama2c_tokenizer(std::move(pieces), std::move(scores), byte_ids)};
}

namespace {

/// The ids that merges may produce: every piece but the control ids and the byte-fallback ones.
std::vector<bool> normal_pieces(const std::vector<std::string>& pieces) {
  std::vector<bool> normal(pieces.size());
  for (size_t id = first_non_control_id; id < pieces.size(); ++id)
    normal[id] = !byte_of_spm_piece(pieces[id]);
  return normal;
}

}  // namespace

llama2c_tokenizer::llama2c_tokenizer(std::vector<std::string> pieces, std::vector<float> scores,
                                     std::array<int32_t, 256> byte_ids)
    : bytes_of_id_(pieces.size()),
      byte_fallback_(pieces.size()),
      bpe_(pieces, scores, normal_pieces(pieces), byte_ids) {
  for (size_t id = first_non_control_id; id < pieces.size(); ++id) {
    if (auto b = byte_of_spm_piece(pieces[id])) {
      bytes_of_id_[id] = std::string(1, static_cast<char>(*b));
      byte_fallback_[id] = true;
    } else {
      bytes_of_id_[id] = pieces[id];
    }
  }
}

// -- normalization -------------------------------------------------------------------------------

// SentencePiece 0.1.97 (normalizer.cc) with tok512.model's normalizer_spec { name: "identity",
// add_dummy_prefix: true, remove_extra_whitespaces: true, escape_whitespaces: true } does more
// than llama2.c's run.c, and these rules are what it takes to give the same ids on any text:
// 1. remove_extra_whitespaces: leading and trailing spaces are dropped and each run of spaces
//    becomes one. Only U+0020 counts: the identity rule leaves tabs, newlines and U+3000 alone.
// 2. add_dummy_prefix: one space goes in front, but only when something is left after rule 1
//    (so "   " encodes to nothing, as "" does).
// 3. A byte that does not start a well-formed UTF-8 character (stray continuation byte,
//    overlong form, surrogate, truncated sequence) becomes U+FFFD, one byte at a time, which
//    byte fallback then spells as <0xEF><0xBF><0xBD>.
// 4. A literal "▁" (U+2581) in the text is SentencePiece's own space symbol, so it encodes as a
//    space does; it is not collapsed by rule 1, but trailing ones are dropped like spaces.
std::string llama2c_tokenizer::normalize(std::string_view text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size() && text[pos] == ' ') ++pos;
  if (pos == text.size()) return out;
  out.reserve(text.size() - pos + 1);
  out += ' ';
  bool after_space = true;
  while (pos < text.size()) {
    const auto scan = scan_utf8(text.substr(pos));
    if (scan.kind != utf8_kind::valid) {
      out += replacement_character;
      after_space = false;
      pos += 1;
      continue;
    }
    const auto character = text.substr(pos, scan.length);
    pos += scan.length;
    if (character == " ") {
      if (!after_space) out += ' ';
      after_space = true;
    } else {
      out += character == "\u2581" ? std::string_view{" "} : character;
      after_space = false;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// -- tokenizer interface -------------------------------------------------------------------------

expected<std::vector<int32_t>> llama2c_tokenizer::encode(std::string_view text,
                                                         bool add_bos) const {
  std::vector<int32_t> ids;
  if (add_bos) ids.push_back(bos_id());
  bpe_.encode(normalize(text), ids);
  return ids;
}

bool llama2c_tokenizer::is_byte_fallback(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < byte_fallback_.size() && byte_fallback_[id];
}

std::string llama2c_tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= bytes_of_id_.size()) return {};
  return bytes_of_id_[id];
}

// -- loading -------------------------------------------------------------------------------------

expected<std::shared_ptr<const tokenizer>> load_llama2c_tokenizer(const std::string& path) {
  std::error_code err;
  if (!std::filesystem::is_regular_file(path, err))
    return make_error(ec::bad_file, path + ": no such file");
  const auto size = std::filesystem::file_size(path, err);
  std::ifstream in{path, std::ios::binary};
  std::string data(err ? 0 : size, '\0');
  if (err || !in || !in.read(data.data(), static_cast<std::streamsize>(data.size())))
    return make_error(ec::bad_file, path + ": cannot read the file");
  if (data.empty()) return make_error(ec::bad_file, path + ": empty file");
  const auto where = [&](size_t pos) { return " at byte " + std::to_string(pos); };
  if (data.size() < 4)
    return make_error(ec::bad_file, path + ": truncated: " + std::to_string(data.size()) +
                                        " bytes, the header needs 4");
  const auto max_token_length = static_cast<int32_t>(read_u32(data, 0));
  if (max_token_length <= 0)
    return make_error(ec::bad_file,
                      path + ": bad max_token_length " + std::to_string(max_token_length));
  std::vector<std::string> pieces;
  std::vector<float> scores;
  for (size_t pos = 4; pos < data.size();) {
    const auto token = std::to_string(pieces.size());
    if (data.size() - pos < 8)
      return make_error(ec::bad_file,
                        path + ": truncated in the header of token " + token + where(pos));
    const uint32_t score_bits = read_u32(data, pos);
    float score = 0;
    std::memcpy(&score, &score_bits, sizeof score);
    const auto length = static_cast<int32_t>(read_u32(data, pos + 4));
    pos += 8;
    if (length < 0 || length > max_token_length)
      return make_error(ec::bad_file, path + ": token " + token + " has bad length " +
                                          std::to_string(length) + " (max_token_length " +
                                          std::to_string(max_token_length) + ")" + where(pos - 4));
    if (data.size() - pos < static_cast<size_t>(length))
      return make_error(ec::bad_file, path + ": truncated in token " + token + ": needs " +
                                          std::to_string(length) + " bytes" + where(pos) +
                                          ", the file has " + std::to_string(data.size() - pos));
    pieces.emplace_back(data, pos, static_cast<size_t>(length));
    scores.push_back(score);
    pos += static_cast<size_t>(length);
  }
  auto result = llama2c_tokenizer::make(std::move(pieces), std::move(scores), path);
  if (!result) return std::move(result.error());
  return std::shared_ptr<const tokenizer>{std::move(*result)};
}

}  // namespace conveyor::tokenizers
