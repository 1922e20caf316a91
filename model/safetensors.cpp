// The safetensors reader: a memory map, a checked header, conversion of F32/F16/BF16 to float32.
#include "model/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/files.hpp"

namespace conveyor::model {

namespace {

using json = nlohmann::json;

// A header larger than this is refused before it is parsed (the format's own limit is 100 MB).
constexpr int64_t max_header_bytes = 100 * 1024 * 1024;

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // infinity or NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;  // zero
  } else {
    // Subnormal: normalise the mantissa.
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// "[a, b, c]" for error messages.
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

int64_t tensor_entry::elements() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

int64_t safetensors_dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" ||
      dtype == "F8_E5M2")
    return 1;
  return 0;
}

safetensors_file::~safetensors_file() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), static_cast<size_t>(size_));
}

expected<std::shared_ptr<const safetensors_file>> safetensors_file::open(const std::string& path) {
  auto bad = [&](const std::string& why) { return make_error(ec::bad_file, path + ": " + why); };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return bad("cannot open the weights file (" + std::string{std::strerror(errno)} + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return bad("not a regular file");
  }
  std::shared_ptr<safetensors_file> file{new safetensors_file};
  file->path_ = path;
  file->size_ = st.st_size;
  if (file->size_ < 8) {
    ::close(fd);
    return bad("too short for a safetensors file: " + std::to_string(file->size_) +
               " bytes, the header length alone is 8");
  }
  void* map = ::mmap(nullptr, static_cast<size_t>(file->size_), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return bad("cannot map the file (" + std::string{std::strerror(errno)} + ")");
  file->data_ = static_cast<const unsigned char*>(map);

  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | file->data_[i];
  if (header_length > uint64_t(max_header_bytes) || int64_t(header_length) > file->size_ - 8)
    return bad("header length " + std::to_string(header_length) + " runs past the end of the " +
               std::to_string(file->size_) + "-byte file");
  const int64_t data_start = 8 + int64_t(header_length);
  const int64_t data_bytes = file->size_ - data_start;
  json header;
  try {
    header = json::parse(file->data_ + 8, file->data_ + data_start);
  } catch (const json::exception& e) {
    return bad(std::string{"malformed JSON header: "} + e.what());
  }
  if (!header.is_object()) return bad("the JSON header is not an object");
  struct range {
    int64_t begin, end;
    const std::string* name;
  };
  std::vector<range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const json& t = it.value();
    auto bad_tensor = [&](const std::string& why) { return bad("tensor '" + name + "': " + why); };
    if (!t.is_object()) return bad_tensor("header entry is not an object");
    tensor_entry entry;
    if (!t.contains("dtype") || !t["dtype"].is_string()) return bad_tensor("no string 'dtype'");
    entry.dtype = t["dtype"].get<std::string>();
    const int64_t element_size = safetensors_dtype_size(entry.dtype);
    if (element_size == 0) return bad_tensor("unknown dtype '" + entry.dtype + "'");
    if (!t.contains("shape") || !t["shape"].is_array()) return bad_tensor("no array 'shape'");
    int64_t bytes = element_size;
    for (const auto& d : t["shape"]) {
      if (!d.is_number_unsigned()) return bad_tensor("'shape' holds a non-integer or negative");
      const uint64_t n = d.get<uint64_t>();
      if (n > uint64_t(std::numeric_limits<int64_t>::max()) ||
          (n != 0 && bytes > std::numeric_limits<int64_t>::max() / int64_t(n)))
        return bad_tensor("shape " + t["shape"].dump() + " is too large");
      entry.shape.push_back(int64_t(n));
      bytes *= int64_t(n);
    }
    const auto& offsets = t.contains("data_offsets") ? t["data_offsets"] : json{};
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      return bad_tensor("'data_offsets' is not two non-negative integers");
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end) return bad_tensor("data_offsets " + offsets.dump() + " end before they begin");
    if (end > uint64_t(data_bytes))
      return bad_tensor("data_offsets " + offsets.dump() + " run past the end of the data (" +
                        std::to_string(data_bytes) + " bytes; truncated file?)");
    if (int64_t(end - begin) != bytes)
      return bad_tensor("data_offsets " + offsets.dump() + " hold " +
                        std::to_string(end - begin) + " bytes but " + entry.dtype + " " +
                        shape_text(entry.shape) + " needs " + std::to_string(bytes));
    entry.begin = data_start + int64_t(begin);
    entry.end = data_start + int64_t(end);
    auto placed = file->tensors_.emplace(name, std::move(entry)).first;
    ranges.push_back({placed->second.begin, placed->second.end, &placed->first});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const range& a, const range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].begin < ranges[i - 1].end)
      return bad("tensors '" + *ranges[i - 1].name + "' and '" + *ranges[i].name +
                 "' overlap (their data_offsets share bytes)");
  return std::shared_ptr<const safetensors_file>{std::move(file)};
}

const tensor_entry* safetensors_file::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

error safetensors_file::read_f32(const std::string& name, float* out) const {
  const tensor_entry* t = find(name);
  if (t == nullptr) return make_error(ec::bad_file, path_ + ": no tensor '" + name + "'");
  const unsigned char* src = data_ + t->begin;
  const int64_t n = t->elements();
  if (t->dtype == "F32") {
    if (n > 0) std::memcpy(out, src, size_t(n) * sizeof(float));  // an empty `out` may be null
  } else if (t->dtype == "BF16") {
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t bits = uint32_t(src[2 * i] | (src[2 * i + 1] << 8)) << 16;
      std::memcpy(out + i, &bits, sizeof(float));
    }
  } else if (t->dtype == "F16") {
    for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(uint16_t(src[2 * i] | (src[2 * i + 1] << 8)));
  } else {
    return make_error(ec::bad_file, path_ + ": tensor '" + name + "' has unsupported dtype " +
                                        t->dtype + " (supported: F32, F16, BF16)");
  }
  return {};
}

expected<safetensors_set> safetensors_set::open(const std::string& dir) {
  safetensors_set set;
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  if (is_regular_file(single)) {
    auto file = safetensors_file::open(single);
    if (!file) return file.error();
    set.where_ = single;
    for (const auto& [name, entry] : (*file)->tensors()) set.file_of_[name] = 0;
    set.files_.push_back(std::move(*file));
    return set;
  }
  if (!is_regular_file(index))
    return make_error(ec::bad_file, dir + ": no model.safetensors and no "
                                          "model.safetensors.index.json (missing file)");
  set.where_ = index;
  json map;
  try {
    std::ifstream in(index);
    map = json::parse(in);
  } catch (const json::exception& e) {
    return make_error(ec::bad_file, index + ": malformed JSON: " + e.what());
  }
  if (!map.is_object() || !map.contains("weight_map") || !map["weight_map"].is_object())
    return make_error(ec::bad_file, index + ": no object 'weight_map'");
  std::map<std::string, size_t> opened;
  for (auto it = map["weight_map"].begin(); it != map["weight_map"].end(); ++it) {
    if (!it.value().is_string())
      return make_error(ec::bad_file,
                        index + ": weight_map['" + it.key() + "'] is not a file name");
    const std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "..")
      return make_error(ec::bad_file, index + ": weight_map['" + it.key() +
                                          "'] names '" + shard + "', not a file of " + dir);
    auto found = opened.find(shard);
    if (found == opened.end()) {
      auto file = safetensors_file::open(dir + "/" + shard);
      if (!file) return file.error();
      found = opened.emplace(shard, set.files_.size()).first;
      set.files_.push_back(std::move(*file));
    }
    if (set.files_[found->second]->find(it.key()) == nullptr)
      return make_error(ec::bad_file, index + ": weight_map puts tensor '" + it.key() + "' in " +
                                          shard + ", which has no such tensor");
    set.file_of_[it.key()] = found->second;
  }
  return set;
}

const safetensors_file* safetensors_set::file_of(const std::string& name) const {
  auto it = file_of_.find(name);
  return it == file_of_.end() ? nullptr : files_[it->second].get();
}

const tensor_entry* safetensors_set::find(const std::string& name) const {
  const auto* file = file_of(name);
  return file == nullptr ? nullptr : file->find(name);
}

int64_t safetensors_set::data_bytes() const {
  int64_t total = 0;
  for (const auto& f : files_)
    for (const auto& [name, t] : f->tensors()) total += t.end - t.begin;
  return total;
}

std::string safetensors_set::main_dtype() const {
  std::map<std::string, int64_t> bytes;
  for (const auto& f : files_)
    for (const auto& [name, t] : f->tensors()) bytes[t.dtype] += t.end - t.begin;
  std::string best;
  int64_t most = -1;
  for (const auto& [dtype, n] : bytes)
    if (n > most) best = dtype, most = n;
  return best;
}

}  // namespace conveyor::model
