// The GGUF reader: a read-only memory map and a parser that checks every count, length and byte
// range against the file before it believes it.
#include "gguf/gguf_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace conveyor::gguf {

namespace {

struct type_entry {
  uint32_t number;
  const char* name;
  type_traits traits;
};

// ggml's types (ggml.c's type_traits: name, block size, block bytes).
constexpr type_entry type_table[] = {
    {0, "F32", {1, 4}},         {1, "F16", {1, 2}},         {2, "Q4_0", {32, 18}},
    {3, "Q4_1", {32, 20}},      {6, "Q5_0", {32, 22}},      {7, "Q5_1", {32, 24}},
    {8, "Q8_0", {32, 34}},      {9, "Q8_1", {32, 40}},      {10, "Q2_K", {256, 84}},
    {11, "Q3_K", {256, 110}},   {12, "Q4_K", {256, 144}},   {13, "Q5_K", {256, 176}},
    {14, "Q6_K", {256, 210}},   {15, "Q8_K", {256, 292}},   {16, "IQ2_XXS", {256, 66}},
    {17, "IQ2_XS", {256, 74}},  {18, "IQ3_XXS", {256, 98}}, {19, "IQ1_S", {256, 50}},
    {20, "IQ4_NL", {32, 18}},   {21, "IQ3_S", {256, 110}},  {22, "IQ2_S", {256, 82}},
    {23, "IQ4_XS", {256, 136}}, {24, "I8", {1, 1}},         {25, "I16", {1, 2}},
    {26, "I32", {1, 4}},        {27, "I64", {1, 8}},        {28, "F64", {1, 8}},
    {29, "IQ1_M", {256, 56}},   {30, "BF16", {1, 2}},       {34, "TQ1_0", {256, 54}},
    {35, "TQ2_0", {256, 66}},   {39, "MXFP4", {32, 17}},    {40, "NVFP4", {64, 36}},
    {41, "Q1_0", {128, 18}},    {42, "Q2_0", {64, 18}},
};

const type_entry* find_type(uint32_t type) {
  for (const auto& t : type_table)
    if (t.number == type) return &t;
  return nullptr;
}

constexpr const char* value_type_names[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                            "int32",  "float32", "bool",   "string", "array",
                                            "uint64", "int64",   "float64"};

// Bytes of one scalar of `type` (numbers and bool), 0 for strings and arrays.
int64_t scalar_bytes(value_type type) {
  switch (type) {
    case value_type::u8:
    case value_type::i8:
    case value_type::boolean:
      return 1;
    case value_type::u16:
    case value_type::i16:
      return 2;
    case value_type::u32:
    case value_type::i32:
    case value_type::f32:
      return 4;
    case value_type::u64:
    case value_type::i64:
    case value_type::f64:
      return 8;
    default:
      return 0;
  }
}

bool integer_kind(value_type type) {
  switch (type) {
    case value_type::u8:
    case value_type::i8:
    case value_type::u16:
    case value_type::i16:
    case value_type::u32:
    case value_type::i32:
    case value_type::u64:
    case value_type::i64:
      return true;
    default:
      return false;
  }
}

uint64_t load_le(const uint8_t* p, int64_t bytes) {
  uint64_t x = 0;
  for (int64_t i = bytes - 1; i >= 0; --i) x = (x << 8) | p[i];
  return x;
}

// The integer a scalar of integer kind `type` with raw bits `raw` holds; nullopt when it does not
// fit int64 (u64 above INT64_MAX).
std::optional<int64_t> integer_of(value_type type, uint64_t raw) {
  switch (type) {
    case value_type::u8:
    case value_type::u16:
    case value_type::u32:
      return int64_t(raw);
    case value_type::i8:
      return int64_t(int8_t(uint8_t(raw)));
    case value_type::i16:
      return int64_t(int16_t(uint16_t(raw)));
    case value_type::i32:
      return int64_t(int32_t(uint32_t(raw)));
    case value_type::i64:
      return int64_t(raw);
    case value_type::u64:
      if (raw > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return int64_t(raw);
    default:
      return std::nullopt;
  }
}

double float_of(value_type type, uint64_t raw) {
  if (type == value_type::f32) {
    const uint32_t bits = uint32_t(raw);
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
  double d;
  std::memcpy(&d, &raw, sizeof(d));
  return d;
}

error type_error(const value& v, const char* wanted) {
  return make_error(ec::bad_file, v.describe() + ", not " + wanted);
}

// What a parse found wrong; open() turns it into an error naming the file.
struct malformed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "'GGUF'" with unprintable bytes as \xNN.
std::string quoted_bytes(const uint8_t* p, size_t n) {
  static const char* hex = "0123456789abcdef";
  std::string s = "'";
  for (size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\' && p[i] != '\'') {
      s += char(p[i]);
    } else {
      s += "\\x";
      s += hex[p[i] >> 4];
      s += hex[p[i] & 15];
    }
  }
  return s + "'";
}

// A name from the file for messages: at most 80 bytes, quoted.
std::string shown(const std::string& name) {
  if (name.size() <= 80)
    return quoted_bytes(reinterpret_cast<const uint8_t*>(name.data()), name.size());
  return quoted_bytes(reinterpret_cast<const uint8_t*>(name.data()), 80) + "...";
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

// -- types ----------------------------------------------------------------------------------------

std::string type_name(uint32_t type) {
  const auto* t = find_type(type);
  return t != nullptr ? t->name : "type " + std::to_string(type);
}

std::optional<type_traits> traits_of(uint32_t type) {
  const auto* t = find_type(type);
  if (t == nullptr) return std::nullopt;
  return t->traits;
}

std::string value_type_name(uint32_t type) {
  if (type < std::size(value_type_names)) return value_type_names[type];
  return "type " + std::to_string(type);
}

int64_t tensor_info::elements() const {
  int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

// -- values ---------------------------------------------------------------------------------------

bool value::is_integer() const {
  return integer_kind(kind_);
}

expected<int64_t> value::as_int() const {
  if (!integer_kind(kind_)) return type_error(*this, "an integer");
  auto x = integer_of(kind_, bits_);
  if (!x) return make_error(ec::bad_file, describe() + " does not fit a signed 64-bit integer");
  return *x;
}

expected<double> value::as_float() const {
  if (kind_ == value_type::f32 || kind_ == value_type::f64) return float_of(kind_, bits_);
  if (integer_kind(kind_)) {
    if (kind_ == value_type::u64) return double(bits_);
    return double(*integer_of(kind_, bits_));
  }
  return type_error(*this, "a number");
}

expected<bool> value::as_bool() const {
  if (kind_ != value_type::boolean) return type_error(*this, "a bool");
  return bits_ != 0;
}

expected<std::string> value::as_string() const {
  if (kind_ != value_type::string) return type_error(*this, "a string");
  return bytes_;
}

size_t value::size() const {
  if (kind_ != value_type::array) return 0;
  const int64_t width = scalar_bytes(element_kind_);
  return width > 0 ? bytes_.size() / size_t(width) : elements_.size();
}

value value::at(size_t i) const {
  const int64_t width = scalar_bytes(element_kind_);
  if (width == 0) return elements_.at(i);
  if (i >= size()) throw std::out_of_range("gguf::value::at");
  value v;
  v.kind_ = element_kind_;
  v.bits_ = load_le(reinterpret_cast<const uint8_t*>(bytes_.data()) + i * size_t(width), width);
  return v;
}

expected<std::vector<std::string>> value::strings() const {
  if (kind_ != value_type::array || element_kind_ != value_type::string)
    return type_error(*this, "an array of strings");
  std::vector<std::string> out;
  out.reserve(elements_.size());
  for (const auto& e : elements_) out.push_back(e.bytes_);
  return out;
}

expected<std::vector<float>> value::floats() const {
  if (kind_ != value_type::array ||
      (element_kind_ != value_type::f32 && element_kind_ != value_type::f64))
    return type_error(*this, "an array of floats");
  const int64_t width = scalar_bytes(element_kind_);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes_.data());
  std::vector<float> out(size());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = float(float_of(element_kind_, load_le(p + i * size_t(width), width)));
  return out;
}

expected<std::vector<int64_t>> value::ints() const {
  if (kind_ != value_type::array || !integer_kind(element_kind_))
    return type_error(*this, "an array of integers");
  const int64_t width = scalar_bytes(element_kind_);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes_.data());
  std::vector<int64_t> out(size());
  for (size_t i = 0; i < out.size(); ++i) {
    auto x = integer_of(element_kind_, load_le(p + i * size_t(width), width));
    if (!x)
      return make_error(ec::bad_file, describe() + ": element " + std::to_string(i) +
                                          " does not fit a signed 64-bit integer");
    out[i] = *x;
  }
  return out;
}

std::string value::describe() const {
  const std::string kind = value_type_name(uint32_t(kind_));
  switch (kind_) {
    case value_type::string:
      return "string of " + std::to_string(bytes_.size()) + " bytes";
    case value_type::array:
      return "array of " + std::to_string(size()) + " " + value_type_name(uint32_t(element_kind_));
    case value_type::boolean:
      return bits_ != 0 ? "bool true" : "bool false";
    case value_type::f32:
    case value_type::f64:
      return kind + " " + std::to_string(float_of(kind_, bits_));
    case value_type::u64:
      return kind + " " + std::to_string(bits_);
    default:
      return kind + " " + std::to_string(*integer_of(kind_, bits_));
  }
}

// -- the parser -----------------------------------------------------------------------------------

/// Reads a mapped GGUF file front to back; every read is checked against the end of the file and
/// every failure throws `malformed` with what was being read.
class file_parser {
 public:
  file_parser(gguf_file& file) : file_(file), p_(file.map_), size_(uint64_t(file.size_)) {}

  void parse();

 private:
  [[noreturn]] void fail(const std::string& why) const { throw malformed(context_ + why); }

  uint64_t remaining() const { return size_ - pos_; }

  const uint8_t* take(uint64_t bytes, const char* what) {
    if (bytes > remaining())
      fail("truncated file: " + std::string{what} + " at byte " + std::to_string(pos_) + " needs " +
           std::to_string(bytes) + " bytes, the file ends at " + std::to_string(size_));
    const uint8_t* at = p_ + pos_;
    pos_ += bytes;
    return at;
  }
  uint32_t u32(const char* what) { return uint32_t(load_le(take(4, what), 4)); }
  uint64_t u64(const char* what) { return load_le(take(8, what), 8); }

  std::string text(const char* what) {
    const uint64_t start = pos_;
    const uint64_t length = u64(what);
    if (length > remaining())
      fail(std::string{what} + " at byte " + std::to_string(start) + " claims " +
           std::to_string(length) + " bytes, past the end of the " + std::to_string(size_) +
           "-byte file (truncated file?)");
    const uint8_t* at = take(length, what);
    return std::string(reinterpret_cast<const char*>(at), size_t(length));
  }

  value_type kind(const char* what) {
    const uint64_t start = pos_;
    const uint32_t k = u32(what);
    if (k > uint32_t(value_type::f64))
      fail("unknown value type " + std::to_string(k) + " at byte " + std::to_string(start));
    return value_type(k);
  }

  value parse_value(value_type k, int depth);
  void parse_metadata(uint64_t count);
  void parse_tensor_infos(uint64_t count);
  void place_tensors();

  gguf_file& file_;
  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
  std::string context_;
};

value file_parser::parse_value(value_type k, int depth) {
  value v;
  v.kind_ = k;
  const int64_t width = scalar_bytes(k);
  if (width > 0) {
    v.bits_ = load_le(take(uint64_t(width), "a value"), width);
    if (k == value_type::boolean && v.bits_ > 1)
      fail("bool value " + std::to_string(v.bits_) + " at byte " + std::to_string(pos_ - 1) +
           " is neither 0 nor 1");
    return v;
  }
  if (k == value_type::string) {
    v.bytes_ = text("a string");
    return v;
  }
  // An array: element type, count, elements.
  const uint64_t start = pos_;
  v.element_kind_ = kind("an array's element type");
  if (v.element_kind_ == value_type::array && depth > 0)
    fail("array at byte " + std::to_string(start) +
         " holds arrays of arrays (nesting deeper than one level)");
  const uint64_t count = u64("an array's length");
  const int64_t element_width = scalar_bytes(v.element_kind_);
  // The fewest bytes one element takes: its own width, a string's length, an array's header.
  const uint64_t least = element_width > 0                       ? uint64_t(element_width)
                         : v.element_kind_ == value_type::string ? 8
                                                                 : 12;
  if (count > remaining() / least)
    fail("array at byte " + std::to_string(start) + " claims " + std::to_string(count) + " " +
         value_type_name(uint32_t(v.element_kind_)) + " elements, more than the " +
         std::to_string(remaining()) + " bytes left in the file can hold (truncated file?)");
  if (element_width > 0) {
    const uint8_t* at = take(count * uint64_t(element_width), "an array");
    v.bytes_.assign(reinterpret_cast<const char*>(at), size_t(count * uint64_t(element_width)));
    if (v.element_kind_ == value_type::boolean)
      for (uint64_t i = 0; i < count; ++i)
        if (at[i] > 1)
          fail("bool element " + std::to_string(i) + " of the array at byte " +
               std::to_string(start) + " is " + std::to_string(at[i]) + ", neither 0 nor 1");
    return v;
  }
  for (uint64_t i = 0; i < count; ++i)
    v.elements_.push_back(parse_value(v.element_kind_, depth + 1));
  return v;
}

void file_parser::parse_metadata(uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    context_ = "metadata key " + std::to_string(i) + ": ";
    std::string key = text("the key");
    if (key.empty()) fail("empty key");
    context_ = "key " + shown(key) + ": ";
    if (file_.key_index_.count(key) != 0) fail("the key appears twice");
    const value_type k = kind("the value type");
    value v = parse_value(k, 0);
    file_.key_index_.emplace(key, file_.metadata_.size());
    file_.metadata_.emplace_back(std::move(key), std::move(v));
  }
  context_.clear();
  if (const value* a = file_.find("general.alignment")) {
    context_ = "key 'general.alignment': ";
    if (a->kind() != value_type::u32) fail(a->describe() + ", not a uint32");
    const uint64_t alignment = *a->as_int();
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
      fail(std::to_string(alignment) + " is not a power of two");
    file_.alignment_ = alignment;
    context_.clear();
  }
}

void file_parser::parse_tensor_infos(uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    context_ = "tensor " + std::to_string(i) + ": ";
    tensor_info t;
    t.name = text("the name");
    if (t.name.empty()) fail("empty name");
    context_ = "tensor " + shown(t.name) + ": ";
    if (file_.tensor_index_.count(t.name) != 0) fail("the name appears twice");
    const uint32_t n_dims = u32("the number of dimensions");
    if (n_dims < 1 || n_dims > 4) fail(std::to_string(n_dims) + " dimensions (1 to 4 are allowed)");
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = u64("a dimension");
      if (n < 1 || n > uint64_t(std::numeric_limits<int64_t>::max()))
        fail("dimension " + std::to_string(d) + " is " + std::to_string(int64_t(n)) +
             " (each must be at least 1)");
      if (elements > std::numeric_limits<int64_t>::max() / int64_t(n))
        fail("dimensions " + dims_text(t.dims) + " x " + std::to_string(n) +
             " hold more than 2^63 elements");
      elements *= int64_t(n);
      t.dims.push_back(int64_t(n));
    }
    t.type = u32("the type");
    const auto traits = traits_of(t.type);
    if (!traits) fail("unknown ggml type " + std::to_string(t.type));
    if (t.dims[0] % traits->block_elements != 0)
      fail(type_name(t.type) + " " + dims_text(t.dims) + ": rows of " + std::to_string(t.dims[0]) +
           " elements are not a multiple of the " + std::to_string(traits->block_elements) +
           "-element block");
    const int64_t blocks = elements / traits->block_elements;
    if (blocks > std::numeric_limits<int64_t>::max() / traits->block_bytes)
      fail(type_name(t.type) + " " + dims_text(t.dims) + " takes more than 2^63 bytes");
    t.bytes = uint64_t(blocks * traits->block_bytes);
    t.offset = u64("the data offset");
    file_.tensor_index_.emplace(t.name, file_.tensors_.size());
    file_.tensors_.push_back(std::move(t));
  }
  context_.clear();
}

void file_parser::place_tensors() {
  // The data section starts at the next multiple of the alignment after the tensor infos.
  const uint64_t alignment = file_.alignment_;
  const uint64_t pad = (alignment - pos_ % alignment) % alignment;
  file_.data_offset_ = pos_ + pad;  // pos_ <= size_ < 2^63: no overflow
  if (file_.tensors_.empty()) return;
  if (file_.data_offset_ > size_)
    fail("truncated file: the data section would start at byte " +
         std::to_string(file_.data_offset_) + ", past the end of the " + std::to_string(size_) +
         "-byte file");
  const uint64_t data_bytes = size_ - file_.data_offset_;
  std::vector<const tensor_info*> by_offset;
  for (auto& t : file_.tensors_) {
    context_ = "tensor " + shown(t.name) + ": ";
    if (t.offset % alignment != 0)
      fail("data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
           std::to_string(alignment));
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      fail(std::to_string(t.bytes) + " bytes of " + type_name(t.type) + " " + dims_text(t.dims) +
           " at data offset " + std::to_string(t.offset) + " run past the end of the " +
           std::to_string(data_bytes) + "-byte data section (truncated file?)");
    t.data = p_ + file_.data_offset_ + t.offset;
    by_offset.push_back(&t);
  }
  context_.clear();
  std::sort(by_offset.begin(), by_offset.end(),
            [](const tensor_info* a, const tensor_info* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const tensor_info& a = *by_offset[i - 1];
    const tensor_info& b = *by_offset[i];
    if (b.offset < a.offset + a.bytes)
      fail("tensors " + shown(a.name) + " (bytes " + std::to_string(a.offset) + " to " +
           std::to_string(a.offset + a.bytes) + ") and " + shown(b.name) + " (from " +
           std::to_string(b.offset) + ") overlap");
  }
}

void file_parser::parse() {
  if (size_ < 4) fail("too short for a GGUF file: " + std::to_string(size_) + " bytes");
  if (std::memcmp(p_, "GGUF", 4) != 0)
    fail("not a GGUF file: it starts with " + quoted_bytes(p_, 4) + ", not 'GGUF'");
  pos_ = 4;
  const uint32_t version = u32("the version");
  if (version == 1) fail("GGUF version 1 is not supported (versions 2 and 3 are)");
  if (version != 2 && version != 3) {
    if ((version & 0xffffu) == 0)
      fail("GGUF version " + std::to_string(version) +
           ": a big-endian file? Only little-endian files are read");
    fail("unknown GGUF version " + std::to_string(version) + " (versions 2 and 3 are read)");
  }
  file_.version_ = version;
  const uint64_t n_tensors = u64("the tensor count");
  const uint64_t n_kv = u64("the metadata key count");
  // The fewest bytes a key/value pair takes (length, 1-byte key, type, 1-byte value) and a
  // tensor description (length, 1-byte name, 1 dimension, type, offset).
  constexpr uint64_t least_kv = 8 + 1 + 4 + 1, least_tensor = 8 + 1 + 4 + 8 + 4 + 8;
  if (n_kv > remaining() / least_kv)
    fail("the header claims " + std::to_string(n_kv) + " metadata keys, more than the " +
         std::to_string(size_) + "-byte file can hold (truncated file?)");
  if (n_tensors > remaining() / least_tensor)
    fail("the header claims " + std::to_string(n_tensors) + " tensors, more than the " +
         std::to_string(size_) + "-byte file can hold (truncated file?)");
  parse_metadata(n_kv);
  if (n_tensors > remaining() / least_tensor)
    fail("the header claims " + std::to_string(n_tensors) + " tensors, more than the " +
         std::to_string(remaining()) + " bytes after the metadata can hold (truncated file?)");
  parse_tensor_infos(n_tensors);
  place_tensors();
}

// -- the file -------------------------------------------------------------------------------------

gguf_file::~gguf_file() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), size_t(size_));
}

expected<std::shared_ptr<const gguf_file>> gguf_file::open(const std::string& path) {
  auto bad = [&](const std::string& why) { return make_error(ec::bad_file, path + ": " + why); };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return bad("cannot open the file (" + std::string{std::strerror(errno)} + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return bad("not a regular file");
  }
  std::shared_ptr<gguf_file> file{new gguf_file};
  file->path_ = path;
  file->size_ = st.st_size;
  if (file->size_ < 4) {
    ::close(fd);
    return bad("too short for a GGUF file: " + std::to_string(file->size_) + " bytes");
  }
  void* map = ::mmap(nullptr, size_t(file->size_), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED)
    return bad("cannot map the file (" + std::string{std::strerror(errno)} + ")");
  file->map_ = static_cast<const uint8_t*>(map);
  try {
    file_parser{*file}.parse();
  } catch (const malformed& e) {
    return bad(e.what());
  } catch (const std::bad_alloc&) {
    return bad("out of memory while reading the metadata");
  }
  return std::shared_ptr<const gguf_file>{std::move(file)};
}

const value* gguf_file::find(const std::string& key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

const tensor_info* gguf_file::tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void gguf_file::release(const tensor_info& t) const {
  if (t.bytes == 0 || t.data < map_ || t.data + t.bytes > map_ + size_) return;
  const auto page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const auto map_begin = reinterpret_cast<uintptr_t>(map_);
  // Whole pages around the tensor; a neighbour's pages dropped with it are read back on use.
  const uintptr_t begin = reinterpret_cast<uintptr_t>(t.data) / page * page;
  const uintptr_t end =
      std::min((reinterpret_cast<uintptr_t>(t.data) + t.bytes + page - 1) / page * page,
               (map_begin + uintptr_t(size_) + page - 1) / page * page);
  ::madvise(reinterpret_cast<void*>(std::max(begin, map_begin)), end - std::max(begin, map_begin),
            MADV_DONTNEED);
}

// -- typed lookups --------------------------------------------------------------------------------

namespace {

// Looks `key` up in `file` and converts it with `get`; errors name the file and the key.
template <class Get>
auto lookup(const gguf_file& file, const std::string& key, Get get)
    -> expected<std::optional<typename decltype(get(std::declval<const value&>()))::value_type>> {
  using T = typename decltype(get(std::declval<const value&>()))::value_type;
  const value* v = file.find(key);
  if (v == nullptr) return std::optional<T>{};
  auto x = get(*v);
  if (!x)
    return make_error(ec::bad_file, file.path() + ": key '" + key + "': " + x.error().message);
  return std::optional<T>{std::move(*x)};
}

template <class T>
expected<T> required(const gguf_file& file, const std::string& key, expected<std::optional<T>> x) {
  if (!x) return std::move(x).error();
  if (!*x) return make_error(ec::bad_file, file.path() + ": key '" + key + "' is missing");
  return std::move(**x);
}

}  // namespace

#define CONVEYOR_GGUF_LOOKUP(name, type, getter)                                           \
  expected<std::optional<type>> gguf_file::optional_##name(const std::string& key) const { \
    return lookup(*this, key, [](const value& v) { return v.getter(); });                  \
  }                                                                                        \
  expected<type> gguf_file::name(const std::string& key) const {                           \
    return required(*this, key, optional_##name(key));                                     \
  }

CONVEYOR_GGUF_LOOKUP(integer, int64_t, as_int)
CONVEYOR_GGUF_LOOKUP(number, double, as_float)
CONVEYOR_GGUF_LOOKUP(boolean, bool, as_bool)
CONVEYOR_GGUF_LOOKUP(string, std::string, as_string)
CONVEYOR_GGUF_LOOKUP(strings, std::vector<std::string>, strings)
CONVEYOR_GGUF_LOOKUP(floats, std::vector<float>, floats)
CONVEYOR_GGUF_LOOKUP(ints, std::vector<int64_t>, ints)

#undef CONVEYOR_GGUF_LOOKUP

}  // namespace conveyor::gguf
