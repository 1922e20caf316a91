// The safetensors format: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the raw data. Read through a memory map, with every
// offset and size checked against the file and each other before any tensor is touched.
// Torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace conveyor::model {

/// One tensor of a safetensors file.
struct tensor_entry {
  /// The dtype as the header writes it: "F32", "F16", "BF16", "I64", ...
  std::string dtype;
  std::vector<int64_t> shape;
  /// Byte range in the file (absolute: the header's data_offsets plus 8 plus the header).
  int64_t begin = 0;
  int64_t end = 0;
  int64_t elements() const;
};

/// A memory-mapped safetensors file whose header passed every check. Move-only.
class safetensors_file {
 public:
  /// Maps `path` and checks it: header length, JSON, each tensor's dtype, shape and byte range
  /// (in bounds, size = elements x dtype size, no two overlapping). Errors name the file and the
  /// tensor or key.
  static expected<std::shared_ptr<const safetensors_file>> open(const std::string& path);

  ~safetensors_file();
  safetensors_file(const safetensors_file&) = delete;
  safetensors_file& operator=(const safetensors_file&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, tensor_entry>& tensors() const { return tensors_; }
  /// The tensor called `name`, or nullptr.
  const tensor_entry* find(const std::string& name) const;
  /// Bytes of the file.
  int64_t size() const { return size_; }

  /// Converts tensor `name` (F32, F16 or BF16) to float32 into `out` (elements() floats).
  /// Errors name the file and the tensor (missing, unsupported dtype).
  error read_f32(const std::string& name, float* out) const;

 private:
  safetensors_file() = default;
  std::string path_;
  const unsigned char* data_ = nullptr;
  int64_t size_ = 0;
  std::map<std::string, tensor_entry> tensors_;
};

/// Bytes of one element of a safetensors dtype, or 0 for a dtype this reader does not know.
int64_t safetensors_dtype_size(const std::string& dtype);

/// The weights of a model directory: model.safetensors, or the shards that
/// model.safetensors.index.json's weight_map names.
class safetensors_set {
 public:
  /// Opens the weights of directory `dir`; errors name the file and the key or tensor.
  static expected<safetensors_set> open(const std::string& dir);

  /// The file holding tensor `name`, or nullptr.
  const safetensors_file* file_of(const std::string& name) const;
  /// The tensor `name`, or nullptr.
  const tensor_entry* find(const std::string& name) const;
  /// Every file, in the order opened.
  const std::vector<std::shared_ptr<const safetensors_file>>& files() const { return files_; }
  /// Bytes of tensor data over all files.
  int64_t data_bytes() const;
  /// The dtype most of the bytes are stored in ("F32", "BF16", ...).
  std::string main_dtype() const;
  /// A short name of where the weights are ("DIR/model.safetensors" or the index).
  const std::string& where() const { return where_; }

 private:
  std::string where_;
  std::vector<std::shared_ptr<const safetensors_file>> files_;
  std::map<std::string, size_t> file_of_;
};

}  // namespace conveyor::model
