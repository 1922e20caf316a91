// The GGUF format (llama.cpp's model files): a header, typed metadata key/value pairs, tensor
// descriptions, then the aligned tensor data. Read through a read-only memory map, with every
// count, length, dimension and byte range checked against the file and each other before any
// tensor is touched. Torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/error.hpp"

namespace conveyor::gguf {

// -- tensor types ---------------------------------------------------------------------------------

/// ggml's tensor types, by their numbers in the file (ggml.h's `ggml_type`; the gaps are types
/// ggml removed).
enum class ggml_type : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  iq2_xxs = 16,
  iq2_xs = 17,
  iq3_xxs = 18,
  iq1_s = 19,
  iq4_nl = 20,
  iq3_s = 21,
  iq2_s = 22,
  iq4_xs = 23,
  i8 = 24,
  i16 = 25,
  i32 = 26,
  i64 = 27,
  f64 = 28,
  iq1_m = 29,
  bf16 = 30,
  tq1_0 = 34,
  tq2_0 = 35,
  mxfp4 = 39,
  nvfp4 = 40,
  q1_0 = 41,
  q2_0 = 42,
};

/// The size of one block of a type: `block_elements` numbers stored in `block_bytes` bytes.
struct type_traits {
  int64_t block_elements;
  int64_t block_bytes;
};

/// ggml's name of type number `type` ("F32", "Q4_K", "BF16"), "type N" for a number ggml does
/// not know.
std::string type_name(uint32_t type);

/// The block size of type number `type` (f32 {1, 4}, q8_0 {32, 34}, q4_k {256, 144}, ...), or
/// nullopt for a number ggml does not know.
std::optional<type_traits> traits_of(uint32_t type);

// -- tensors --------------------------------------------------------------------------------------

/// One tensor of a GGUF file, checked: its bytes lie inside the file's data section, aligned, and
/// overlap no other tensor's.
struct tensor_info {
  std::string name;
  /// ggml order: dims[0] is the contiguous one (a PyTorch matrix [out, in] has dims {in, out}).
  /// 1 to 4 dimensions, each at least 1.
  std::vector<int64_t> dims;
  /// The ggml type number (see ggml_type); traits_of(type) is known.
  uint32_t type = 0;
  /// Bytes from the start of the data section; a multiple of the file's alignment.
  uint64_t offset = 0;
  /// Bytes of data: elements() / block_elements * block_bytes.
  uint64_t bytes = 0;
  /// The first byte of the data, inside the file's map (valid while the gguf_file lives).
  const uint8_t* data = nullptr;

  /// The number of elements (product of dims).
  int64_t elements() const;
};

// -- metadata values ------------------------------------------------------------------------------

/// The GGUF metadata value types, by their numbers in the file.
enum class value_type : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

/// The format's name of a value type ("uint32", "string", "array"), "type N" for others.
std::string value_type_name(uint32_t type);

/// One metadata value: a number, a bool, a string, or an array of values of one type (arrays of
/// arrays one level deep). The getters' errors (ec::bad_file) say what the value is and what was
/// asked; gguf_file's typed lookups put the file and the key in front.
class value {
 public:
  /// The type of this value.
  value_type kind() const { return kind_; }
  /// The type of the elements of an array (meaningless for other kinds).
  value_type element_kind() const { return element_kind_; }
  /// Whether this is an integer of any width or signedness.
  bool is_integer() const;
  /// Whether this is an array.
  bool is_array() const { return kind_ == value_type::array; }

  /// An integer of any kind as int64 (u64 above INT64_MAX is an error).
  expected<int64_t> as_int() const;
  /// A float32 or float64 (or an integer, converted).
  expected<double> as_float() const;
  /// A bool.
  expected<bool> as_bool() const;
  /// A string (bytes as the file holds them; GGUF says UTF-8).
  expected<std::string> as_string() const;

  /// The number of elements of an array; 0 for other kinds.
  size_t size() const;
  /// Element `i` (< size()) of an array.
  value at(size_t i) const;

  /// An array of strings.
  expected<std::vector<std::string>> strings() const;
  /// An array of float32 or float64 numbers, as float.
  expected<std::vector<float>> floats() const;
  /// An array of integers of any kind, as int64 (range-checked).
  expected<std::vector<int64_t>> ints() const;

  /// A short description for messages: "uint32 7", "string of 12 bytes", "array of 3 float32".
  std::string describe() const;

 private:
  friend class file_parser;
  value_type kind_ = value_type::u8;
  value_type element_kind_ = value_type::u8;
  /// A scalar number or bool: its bits, zero-extended (floats as their IEEE bits).
  uint64_t bits_ = 0;
  /// A string's bytes; for arrays of numbers or bools, the elements' little-endian bytes.
  std::string bytes_;
  /// The elements of arrays of strings or of arrays.
  std::vector<value> elements_;
};

// -- the file -------------------------------------------------------------------------------------

/// A memory-mapped GGUF file (version 2 or 3) whose header passed every check. Shared and
/// immutable: tensors point into its map, which lives as long as the object.
class gguf_file {
 public:
  /// Maps `path` and checks it. Errors (ec::bad_file) name the file and what is wrong: magic,
  /// version, counts that cannot fit the file, lengths past the end, nesting, duplicate keys or
  /// tensor names, dimensions, unknown tensor types, rows not a multiple of the block, offsets
  /// unaligned, out of the file or overlapping.
  static expected<std::shared_ptr<const gguf_file>> open(const std::string& path);

  ~gguf_file();
  gguf_file(const gguf_file&) = delete;
  gguf_file& operator=(const gguf_file&) = delete;

  /// The path the file was opened from.
  const std::string& path() const { return path_; }
  /// The format version: 2 or 3.
  uint32_t version() const { return version_; }
  /// Bytes of the file.
  int64_t size() const { return size_; }
  /// general.alignment, 32 when absent: tensor offsets are multiples of it.
  uint64_t alignment() const { return alignment_; }
  /// Where the data section starts, in bytes from the start of the file.
  uint64_t data_offset() const { return data_offset_; }

  // -- metadata -----------------------------------------------------------------------------------

  /// Every key and its value, in the file's order.
  const std::vector<std::pair<std::string, value>>& metadata() const { return metadata_; }
  /// The value of `key`, or nullptr.
  const value* find(const std::string& key) const;

  /// Typed lookups. Errors name the file and the key ("FILE: key 'llama.block_count' is
  /// missing", "FILE: key 'K': string of 3 bytes, not an integer"). The optional_ variants give
  /// nullopt for an absent key and an error for a value of the wrong type.
  expected<int64_t> integer(const std::string& key) const;
  expected<std::optional<int64_t>> optional_integer(const std::string& key) const;
  expected<double> number(const std::string& key) const;
  expected<std::optional<double>> optional_number(const std::string& key) const;
  expected<bool> boolean(const std::string& key) const;
  expected<std::optional<bool>> optional_boolean(const std::string& key) const;
  expected<std::string> string(const std::string& key) const;
  expected<std::optional<std::string>> optional_string(const std::string& key) const;
  expected<std::vector<std::string>> strings(const std::string& key) const;
  expected<std::optional<std::vector<std::string>>> optional_strings(const std::string& key) const;
  expected<std::vector<float>> floats(const std::string& key) const;
  expected<std::optional<std::vector<float>>> optional_floats(const std::string& key) const;
  expected<std::vector<int64_t>> ints(const std::string& key) const;
  expected<std::optional<std::vector<int64_t>>> optional_ints(const std::string& key) const;

  // -- tensors ------------------------------------------------------------------------------------

  /// Every tensor, in the file's order.
  const std::vector<tensor_info>& tensors() const { return tensors_; }
  /// The tensor called `name`, or nullptr.
  const tensor_info* tensor(const std::string& name) const;

  /// Drops the pages of [t.data, t.data + t.bytes) from memory once the caller has copied them
  /// (madvise DONTNEED on the read-only file map; a later read faults them in from the file
  /// again). Loading packs tensor by tensor and keeps peak memory low this way.
  void release(const tensor_info& t) const;

 private:
  gguf_file() = default;
  friend class file_parser;
  std::string path_;
  const uint8_t* map_ = nullptr;
  int64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, value>> metadata_;
  std::unordered_map<std::string, size_t> key_index_;
  std::vector<tensor_info> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace conveyor::gguf
