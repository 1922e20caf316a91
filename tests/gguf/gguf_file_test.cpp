// The GGUF reader against files that the PyPI gguf package wrote
// (tools/fixtures/make_gguf_files.py): every metadata value type read back as gguf's own reader
// reads it, tensors of every type with their bytes, ggml's type table, and every check of a hostile
// file naming the file and the fault.
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf_file.hpp"
#include "tests/support/temp_dir.hpp"

using namespace conveyor;
using namespace conveyor::gguf;
using json = nlohmann::json;

namespace {

const std::string fixtures = std::string{CONVEYOR_SOURCE_DIR} + "/tests/fixtures/gguf/";

const json& fixture_facts() {
  static const json e = [] {
    std::ifstream in(fixtures + "expected.json");
    return json::parse(in);
  }();
  return e;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += char(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

std::shared_ptr<const gguf_file> open_ok(const std::string& path) {
  auto f = gguf_file::open(path);
  EXPECT_TRUE(f) << message_of(f.error());
  return f ? *f : nullptr;
}

const json& key_entry(const json& file, const std::string& key) {
  for (const auto& k : file["keys"])
    if (k["key"] == key) return k;
  throw std::runtime_error("no key " + key + " in expected.json");
}

const json& tensor_entry(const std::string& name) {
  for (const auto& t : fixture_facts()["tensors"]["tensors"])
    if (t["name"] == name) return t;
  throw std::runtime_error("no tensor " + name + " in expected.json");
}

// A scalar value compared with what gguf's reader read.
void expect_scalar(const value& v, const json& want, const std::string& what) {
  SCOPED_TRACE(what + ": " + v.describe() + " vs " + want.dump());
  switch (v.kind()) {
    case value_type::f32:
    case value_type::f64:
      EXPECT_EQ(*v.as_float(), want.get<double>());
      EXPECT_EQ(std::signbit(*v.as_float()), std::signbit(want.get<double>()));
      break;
    case value_type::boolean:
      EXPECT_EQ(*v.as_bool(), want.get<bool>());
      break;
    case value_type::string:
      EXPECT_EQ(*v.as_string(), want.get<std::string>());
      break;
    case value_type::u64:
      if (want.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
        ASSERT_FALSE(v.as_int());
        EXPECT_NE(v.as_int().error().message.find("does not fit a signed 64-bit integer"),
                  std::string::npos);
        EXPECT_EQ(*v.as_float(), double(want.get<uint64_t>()));
      } else {
        EXPECT_EQ(*v.as_int(), want.get<int64_t>());
      }
      break;
    default:
      ASSERT_TRUE(v.is_integer());
      EXPECT_EQ(*v.as_int(), want.get<int64_t>());
  }
}

// Whether the array `want` (numbers from gguf's reader) has an element above INT64_MAX.
bool beyond_int64(const json& want) {
  for (const auto& x : want)
    if (x.is_number_unsigned() && x.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      return true;
  return false;
}

}  // namespace

// -- metadata -------------------------------------------------------------------------------------

TEST(gguf_file, reads_every_value_type_as_the_gguf_package_reads_it) {
  auto file = open_ok(fixtures + "metadata.gguf");
  ASSERT_TRUE(file);
  const json& want = fixture_facts()["metadata"];
  EXPECT_EQ(file->version(), want["version"].get<uint32_t>());
  EXPECT_EQ(file->size(), want["size"].get<int64_t>());
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_TRUE(file->tensors().empty());
  ASSERT_EQ(file->metadata().size(), want["keys"].size());
  for (size_t i = 0; i < want["keys"].size(); ++i) {
    const json& k = want["keys"][i];
    const auto& [key, v] = file->metadata()[i];
    SCOPED_TRACE(key);
    EXPECT_EQ(key, k["key"].get<std::string>());
    EXPECT_EQ(file->find(key), &v);
    EXPECT_EQ(uint32_t(v.kind()), k["type"].get<uint32_t>());
    if (!v.is_array()) {
      EXPECT_EQ(v.size(), 0u);
      expect_scalar(v, k["value"], key);
      continue;
    }
    EXPECT_EQ(uint32_t(v.element_kind()), k["element_type"].get<uint32_t>());
    ASSERT_EQ(v.size(), k["value"].size());
    for (size_t j = 0; j < v.size(); ++j) {
      const value e = v.at(j);
      if (e.is_array()) {
        EXPECT_EQ(uint32_t(e.element_kind()), k["inner_type"].get<uint32_t>());
        auto ints = e.ints();
        ASSERT_TRUE(ints) << message_of(ints.error());
        EXPECT_EQ(*ints, k["value"][j].get<std::vector<int64_t>>());
      } else {
        expect_scalar(e, k["value"][j], key + "[" + std::to_string(j) + "]");
      }
    }
    // The typed array getters.
    switch (v.element_kind()) {
      case value_type::string:
        EXPECT_EQ(*v.strings(), k["value"].get<std::vector<std::string>>());
        break;
      case value_type::f32:
      case value_type::f64: {
        std::vector<float> floats;
        for (const auto& x : k["value"]) floats.push_back(float(x.get<double>()));
        EXPECT_EQ(*v.floats(), floats);
        break;
      }
      case value_type::boolean:
      case value_type::array:
        EXPECT_FALSE(v.ints());
        EXPECT_FALSE(v.floats());
        EXPECT_FALSE(v.strings());
        break;
      default:
        if (beyond_int64(k["value"])) {
          EXPECT_FALSE(v.ints());
        } else {
          EXPECT_EQ(*v.ints(), k["value"].get<std::vector<int64_t>>());
        }
        EXPECT_FALSE(v.floats());
        EXPECT_FALSE(v.strings());
    }
  }
}

TEST(gguf_file, typed_lookups_name_the_file_and_the_key) {
  auto file = open_ok(fixtures + "metadata.gguf");
  ASSERT_TRUE(file);
  const std::string path = fixtures + "metadata.gguf";
  EXPECT_EQ(*file->integer("llama.block_count"), 2);
  EXPECT_EQ(*file->integer("test.i8"), -128);
  EXPECT_EQ(*file->number("test.f64"), M_PI);
  EXPECT_EQ(*file->number("test.u16"), 65535.0);  // integers read as numbers too
  EXPECT_TRUE(*file->boolean("test.bool_true"));
  EXPECT_EQ(*file->string("general.architecture"), "llama");
  EXPECT_EQ(*file->string("test.empty_string"), "");
  EXPECT_EQ(file->strings("test.array_string")->size(), 4u);
  EXPECT_EQ(*file->ints("test.array_i16"), (std::vector<int64_t>{-32768, 32767}));
  EXPECT_EQ(*file->floats("test.array_f32"), (std::vector<float>{0.5f, -1.25f, 3.0e38f, 1.0e-40f}));

  auto missing = file->integer("llama.context_length");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ec::bad_file);
  EXPECT_EQ(missing.error().message, path + ": key 'llama.context_length' is missing");
  auto wrong = file->integer("test.string");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().message,
            path + ": key 'test.string': string of 15 bytes, not an integer");
  EXPECT_EQ(file->boolean("test.u8").error().message,
            path + ": key 'test.u8': uint8 255, not a bool");
  EXPECT_EQ(file->strings("test.array_i32").error().message,
            path + ": key 'test.array_i32': array of 3 int32, not an array of strings");
  EXPECT_NE(file->integer("test.u64")
                .error()
                .message.find(path + ": key 'test.u64': uint64 18446744073709551615 does not fit"),
            std::string::npos);

  auto absent = file->optional_integer("llama.context_length");
  ASSERT_TRUE(absent);
  EXPECT_FALSE(absent->has_value());
  auto present = file->optional_string("general.architecture");
  ASSERT_TRUE(present && present->has_value());
  EXPECT_EQ(**present, "llama");
  EXPECT_FALSE(file->optional_floats("test.array_string"));  // present, of the wrong type
  EXPECT_FALSE(file->optional_floats("no.such.key")->has_value());
}

// -- tensors --------------------------------------------------------------------------------------

TEST(gguf_file, tensors_of_every_type_hold_the_bytes_the_package_wrote) {
  auto file = open_ok(fixtures + "tensors.gguf");
  ASSERT_TRUE(file);
  const json& want = fixture_facts()["tensors"];
  EXPECT_EQ(file->alignment(), want["alignment"].get<uint64_t>());
  EXPECT_EQ(file->alignment(), 64u);
  EXPECT_EQ(file->data_offset(), want["data_start"].get<uint64_t>());
  ASSERT_EQ(file->tensors().size(), want["tensors"].size());
  for (size_t i = 0; i < want["tensors"].size(); ++i) {
    const json& w = want["tensors"][i];
    const tensor_info& t = file->tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, w["name"].get<std::string>());
    EXPECT_EQ(file->tensor(t.name), &t);
    EXPECT_EQ(t.type, w["type"].get<uint32_t>());
    EXPECT_EQ(type_name(t.type), w["type_name"].get<std::string>());
    EXPECT_EQ(t.dims, w["dims"].get<std::vector<int64_t>>());
    EXPECT_EQ(t.elements(), w["elements"].get<int64_t>());
    EXPECT_EQ(file->data_offset() + t.offset, w["data_offset"].get<uint64_t>());
    EXPECT_EQ(t.offset % file->alignment(), 0u);
    ASSERT_EQ(t.bytes, w["bytes"].get<uint64_t>());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.data), t.bytes),
              from_hex(w["hex"].get<std::string>()));
  }
  EXPECT_EQ(file->tensor("no.such.tensor"), nullptr);
  // A PyTorch matrix [3, 64] is ggml's {64, 3}.
  EXPECT_EQ(file->tensor("q8_0.matrix")->dims, (std::vector<int64_t>{64, 3}));
}

TEST(gguf_file, released_tensors_read_back_from_the_file) {
  auto file = open_ok(fixtures + "tensors.gguf");
  ASSERT_TRUE(file);
  std::vector<std::string> before;
  for (const auto& t : file->tensors())
    before.emplace_back(reinterpret_cast<const char*>(t.data), t.bytes);
  for (const auto& t : file->tensors()) file->release(t);
  for (size_t i = 0; i < before.size(); ++i) {
    const auto& t = file->tensors()[i];
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.data), t.bytes), before[i]) << t.name;
  }
}

TEST(gguf_file, type_table_matches_the_gguf_package) {
  const json& types = fixture_facts()["types"];
  for (auto it = types.begin(); it != types.end(); ++it) {
    const uint32_t number = uint32_t(std::stoul(it.key()));
    SCOPED_TRACE(it.key());
    EXPECT_EQ(type_name(number), it.value()[0].get<std::string>());
    auto traits = traits_of(number);
    ASSERT_TRUE(traits);
    EXPECT_EQ(traits->block_elements, it.value()[1].get<int64_t>());
    EXPECT_EQ(traits->block_bytes, it.value()[2].get<int64_t>());
  }
  // Numbers ggml removed or never used, and Q2_0, which ggml.h lists after the package's table.
  for (uint32_t number : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 1000u, 0xffffffffu}) {
    EXPECT_FALSE(traits_of(number)) << number;
    EXPECT_EQ(type_name(number), "type " + std::to_string(number));
  }
  EXPECT_EQ(type_name(uint32_t(ggml_type::q2_0)), "Q2_0");
  EXPECT_EQ(traits_of(uint32_t(ggml_type::q4_k))->block_bytes, 144);
}

// -- hostile files --------------------------------------------------------------------------------

namespace {

/// A fixture's bytes with patches applied, written to a file of its own.
class patched {
 public:
  explicit patched(const std::string& fixture) : bytes_(read_bytes(fixtures + fixture)) {}

  patched& u32(uint64_t at, uint32_t x) { return put(at, x, 4); }
  patched& u64(uint64_t at, uint64_t x) { return put(at, x, 8); }
  patched& text(uint64_t at, const std::string& s) {
    bytes_.replace(at, s.size(), s);
    return *this;
  }
  patched& byte(uint64_t at, uint8_t x) { return put(at, x, 1); }

  /// The error opening the patched file gives ("(opened)" when it opens).
  std::string error() const {
    const std::string path = dir_.file("patched.gguf");
    write_bytes(path, bytes_);
    auto f = gguf_file::open(path);
    if (f) return "(opened)";
    EXPECT_EQ(f.error().code, ec::bad_file);
    const std::string& m = f.error().message;
    EXPECT_EQ(m.rfind(path + ": ", 0), 0u) << m;  // names the file first
    return m;
  }

 private:
  patched& put(uint64_t at, uint64_t x, int bytes) {
    for (int i = 0; i < bytes; ++i) bytes_[at + uint64_t(i)] = char((x >> (8 * i)) & 0xff);
    return *this;
  }
  std::string bytes_;
  test::temp_dir dir_{"conveyor_gguf"};
};

#define EXPECT_REFUSED(patch, text)                                               \
  do {                                                                            \
    const std::string message_ = (patch).error();                                 \
    EXPECT_NE(message_.find(text), std::string::npos) << "message: " << message_; \
  } while (false)

uint64_t at(const json& entry, const char* field) {
  return entry[field].get<uint64_t>();
}

const json& meta_key(const std::string& key) {
  return key_entry(fixture_facts()["metadata"], key);
}
const json& tensors_key(const std::string& key) {
  return key_entry(fixture_facts()["tensors"], key);
}

}  // namespace

TEST(gguf_file, refuses_a_bad_magic_or_version) {
  EXPECT_REFUSED(patched("tensors.gguf").text(0, "GGUX"),
                 "not a GGUF file: it starts with 'GGUX', not 'GGUF'");
  EXPECT_REFUSED(patched("tensors.gguf").text(0, std::string("\0\1GG", 4)),
                 "it starts with '\\x00\\x01GG'");
  EXPECT_REFUSED(patched("tensors.gguf").u32(4, 1), "GGUF version 1 is not supported");
  EXPECT_REFUSED(patched("tensors.gguf").u32(4, 4), "unknown GGUF version 4");
  EXPECT_REFUSED(patched("tensors.gguf").u32(4, 0x03000000), "big-endian");
  // Version 2 has version 3's layout on a little-endian machine.
  EXPECT_EQ(patched("tensors.gguf").u32(4, 2).error(), "(opened)");
}

TEST(gguf_file, refuses_counts_the_file_cannot_hold) {
  const uint64_t tensors = at(fixture_facts()["tensors"], "tensor_count_offset");
  const uint64_t keys = at(fixture_facts()["tensors"], "kv_count_offset");
  EXPECT_REFUSED(patched("tensors.gguf").u64(tensors, uint64_t(1) << 62),
                 "the header claims 4611686018427387904 tensors, more than the 2752-byte file");
  EXPECT_REFUSED(patched("tensors.gguf").u64(keys, ~uint64_t(0)),
                 "the header claims 18446744073709551615 metadata keys");
  // One key too many: the first tensor description is read as a key and fails somewhere.
  EXPECT_NE(patched("tensors.gguf").u64(keys, 4).error(), "(opened)");
  EXPECT_REFUSED(
      patched("metadata.gguf").u64(at(meta_key("test.string"), "value_offset"), uint64_t(1) << 40),
      "key 'test.string': a string at byte 303 claims 1099511627776 bytes, past the "
      "end of the 1248-byte file");
  EXPECT_REFUSED(patched("metadata.gguf")
                     .u64(at(meta_key("test.array_u32"), "count_offset"), uint64_t(1) << 40),
                 "key 'test.array_u32': array at byte 671 claims 1099511627776 uint32 elements");
  EXPECT_REFUSED(patched("metadata.gguf")
                     .u64(at(meta_key("test.array_string"), "count_offset"), uint64_t(1) << 60),
                 "claims 1152921504606846976 string elements");
  EXPECT_REFUSED(patched("metadata.gguf").u64(at(meta_key("test.u8"), "key_offset"), 1u << 20),
                 "metadata key 1: the key at byte 69 claims 1048576 bytes");
}

TEST(gguf_file, refuses_bad_keys_and_values) {
  EXPECT_REFUSED(patched("metadata.gguf").u64(at(meta_key("test.u8"), "key_offset"), 0),
                 "metadata key 1: empty key");
  // "test.u16" renamed to "test.u32", which follows it.
  EXPECT_REFUSED(
      patched("metadata.gguf").text(at(meta_key("test.u16"), "key_offset") + 8, "test.u32"),
      "key 'test.u32': the key appears twice");
  EXPECT_REFUSED(patched("metadata.gguf").u32(at(meta_key("test.u32"), "type_offset"), 13),
                 "key 'test.u32': unknown value type 13 at byte 169");
  EXPECT_REFUSED(patched("metadata.gguf").u32(at(meta_key("test.array_u8"), "value_offset"), 99),
                 "key 'test.array_u8': unknown value type 99");
  EXPECT_REFUSED(patched("metadata.gguf").byte(at(meta_key("test.bool_true"), "value_offset"), 2),
                 "key 'test.bool_true': bool value 2 at byte 251 is neither 0 nor 1");
  EXPECT_REFUSED(
      patched("metadata.gguf").byte(at(meta_key("test.array_bool"), "count_offset") + 9, 7),
      "key 'test.array_bool': bool element 1 of the array at byte 822 is 7, neither 0 nor 1");
}

TEST(gguf_file, refuses_arrays_nested_deeper_than_one_level) {
  // The first inner array of [[1, 2, 3], [4], [5, 6]] made an array of arrays.
  EXPECT_REFUSED(
      patched("metadata.gguf").u32(at(meta_key("test.array_of_arrays"), "count_offset") + 8, 9),
      "key 'test.array_of_arrays': array at byte 1137 holds arrays of arrays (nesting deeper "
      "than one level)");
  // [[[1, 2]], [[3]]] as the gguf package writes it.
  auto f = gguf_file::open(fixtures + "nested_deep.gguf");
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message.find("key 'test.deep': array at byte"), std::string::npos)
      << f.error().message;
  EXPECT_NE(f.error().message.find("nesting deeper than one level"), std::string::npos);
}

TEST(gguf_file, refuses_a_bad_alignment) {
  const uint64_t value = at(tensors_key("general.alignment"), "value_offset");
  const uint64_t type = at(tensors_key("general.alignment"), "type_offset");
  EXPECT_REFUSED(patched("tensors.gguf").u32(value, 48),
                 "key 'general.alignment': 48 is not a power of two");
  EXPECT_REFUSED(patched("tensors.gguf").u32(value, 0),
                 "key 'general.alignment': 0 is not a power of two");
  EXPECT_REFUSED(patched("tensors.gguf").u32(type, uint32_t(value_type::i32)),
                 "key 'general.alignment': int32 64, not a uint32");
  // A power of two so large the data section would start past the end.
  EXPECT_REFUSED(patched("tensors.gguf").u32(value, 1u << 20),
                 "truncated file: the data section would start at byte 1048576");
  // Alignment 32: the offsets (multiples of 64) stay aligned, and the data still starts at byte
  // 640, the next multiple of 32 after the descriptions' end at 616.
  EXPECT_EQ(patched("tensors.gguf").u32(value, 32).error(), "(opened)");
}

TEST(gguf_file, refuses_bad_tensor_descriptions) {
  const json& q8 = tensor_entry("q8_0.matrix");
  const json& q4 = tensor_entry("q4_0.matrix");
  const json& f32 = tensor_entry("f32.matrix");
  const json& f4d = tensor_entry("f32.4d");
  EXPECT_REFUSED(patched("tensors.gguf").u64(at(q4, "name_offset"), 0), "tensor 4: empty name");
  EXPECT_REFUSED(patched("tensors.gguf").text(at(q4, "name_offset") + 8, "q8_0.matrix"),
                 "tensor 'q8_0.matrix': the name appears twice");
  EXPECT_REFUSED(patched("tensors.gguf").u32(at(q8, "n_dims_offset"), 0),
                 "tensor 'q8_0.matrix': 0 dimensions (1 to 4 are allowed)");
  EXPECT_REFUSED(patched("tensors.gguf").u32(at(q8, "n_dims_offset"), 5),
                 "tensor 'q8_0.matrix': 5 dimensions");
  EXPECT_REFUSED(patched("tensors.gguf").u64(at(q8, "dims_offset") + 8, 0),
                 "tensor 'q8_0.matrix': dimension 1 is 0 (each must be at least 1)");
  EXPECT_REFUSED(patched("tensors.gguf").u64(at(q8, "dims_offset"), ~uint64_t(0)),
                 "tensor 'q8_0.matrix': dimension 0 is -1");
  {
    patched p("tensors.gguf");
    for (int d = 0; d < 4; ++d) p.u64(at(f4d, "dims_offset") + 8 * uint64_t(d), uint64_t(1) << 32);
    EXPECT_REFUSED(p,
                   "tensor 'f32.4d': dimensions [4294967296] x 4294967296 hold more than 2^63 "
                   "elements");
  }
  EXPECT_REFUSED(patched("tensors.gguf").u32(at(q8, "type_offset"), 4),
                 "tensor 'q8_0.matrix': unknown ggml type 4");
  EXPECT_REFUSED(patched("tensors.gguf").u32(at(q8, "type_offset"), 99),
                 "tensor 'q8_0.matrix': unknown ggml type 99");
  EXPECT_REFUSED(patched("tensors.gguf").u64(at(q8, "dims_offset"), 48),
                 "tensor 'q8_0.matrix': Q8_0 [48, 3]: rows of 48 elements are not a multiple of "
                 "the 32-element block");
  // 2^61 x 1 F32 numbers: elements fit int64, their 2^63 bytes do not.
  EXPECT_REFUSED(patched("tensors.gguf")
                     .u64(at(f32, "dims_offset"), uint64_t(1) << 61)
                     .u64(at(f32, "dims_offset") + 8, 1),
                 "tensor 'f32.matrix': F32 [2305843009213693952, 1] takes more than 2^63 bytes");
}

TEST(gguf_file, refuses_tensor_data_unaligned_outside_the_file_or_overlapping) {
  const json& q8 = tensor_entry("q8_0.matrix");
  const json& q4 = tensor_entry("q4_0.matrix");
  const json& f16 = tensor_entry("f16.vector");
  const json& f4d = tensor_entry("f32.4d");
  const uint64_t data_start = fixture_facts()["tensors"]["data_start"].get<uint64_t>();
  const uint64_t q8_offset = at(q8, "data_offset") - data_start;
  EXPECT_REFUSED(patched("tensors.gguf")
                     .u64(at(f16, "offset_offset"), at(f16, "data_offset") - data_start + 32),
                 "tensor 'f16.vector': data offset 160 is not a multiple of the alignment 64");
  EXPECT_REFUSED(patched("tensors.gguf").u64(at(f4d, "offset_offset"), uint64_t(1) << 40),
                 "tensor 'f32.4d': 96 bytes of F32 [4, 3, 1, 2] at data offset 1099511627776 run "
                 "past the end of the 2112-byte data section (truncated file?)");
  EXPECT_REFUSED(patched("tensors.gguf").u64(at(f4d, "offset_offset"), 2048),
                 "run past the end of the 2112-byte data section");
  EXPECT_REFUSED(patched("tensors.gguf").u64(at(f4d, "offset_offset"), ~uint64_t(63)),
                 "run past the end");
  // q4_0 moved onto q8_0, then into q8_0's second half (204 bytes from 256: up to 460).
  EXPECT_REFUSED(patched("tensors.gguf").u64(at(q4, "offset_offset"), q8_offset),
                 "tensors 'q8_0.matrix' (bytes 256 to 460) and 'q4_0.matrix' (from 256) overlap");
  EXPECT_REFUSED(patched("tensors.gguf").u64(at(q4, "offset_offset"), q8_offset + 192),
                 "tensors 'q8_0.matrix' (bytes 256 to 460) and 'q4_0.matrix' (from 448) overlap");
  // Right after q8_0's end (aligned): a gap-free neighbour, not an overlap.
  EXPECT_EQ(patched("tensors.gguf").u64(at(q4, "offset_offset"), q8_offset + 256).error(),
            "(opened)");
}

TEST(gguf_file, refuses_every_truncation_before_the_end_of_its_contents) {
  test::temp_dir dir{"conveyor_gguf_truncated"};
  for (const std::string name : {"metadata", "tensors"}) {
    const std::string bytes = read_bytes(fixtures + name + ".gguf");
    const size_t end = fixture_facts()[name]["content_end"].get<size_t>();
    ASSERT_EQ(bytes.size(), fixture_facts()[name]["size"].get<size_t>());
    ASSERT_LT(end, bytes.size());  // the package pads the end
    const std::string path = dir.file(name + ".gguf");
    // Every length through the tensor descriptions; in the data, the bytes around each tensor's
    // end and a sparse stride between (a cut there is the same check as any other).
    const size_t data_start = fixture_facts()[name]["data_start"].get<size_t>();
    std::set<size_t> lengths;
    for (size_t length = 0; length <= std::min(data_start, bytes.size()); ++length)
      lengths.insert(length);
    for (size_t length = data_start; length <= bytes.size(); length += 61) lengths.insert(length);
    for (const auto& t : fixture_facts()[name]["tensors"]) {
      const size_t t_end = t["data_offset"].get<size_t>() + t["bytes"].get<size_t>();
      for (size_t length = t_end - 2; length <= t_end + 2; ++length) lengths.insert(length);
    }
    for (size_t length = bytes.size() - 2; length <= bytes.size(); ++length) lengths.insert(length);
    int refused = 0, expected_refused = 0;
    for (size_t length : lengths) {
      expected_refused += length < end ? 1 : 0;
      write_bytes(path, bytes.substr(0, length));
      auto f = gguf_file::open(path);
      if (length < end) {
        ASSERT_FALSE(f) << name << " cut to " << length << " bytes opened";
        EXPECT_EQ(f.error().code, ec::bad_file);
        const std::string& m = f.error().message;
        EXPECT_EQ(m.rfind(path + ": ", 0), 0u) << m;
        EXPECT_TRUE(m.find("truncated") != std::string::npos ||
                    m.find("too short for a GGUF file") != std::string::npos)
            << name << " cut to " << length << ": " << m;
        ++refused;
      } else {
        EXPECT_TRUE(f) << name << " cut to " << length << ": " << message_of(f.error());
      }
    }
    EXPECT_EQ(refused, expected_refused);
    EXPECT_GT(refused, 600);
  }
}

TEST(gguf_file, refuses_what_is_not_a_readable_file) {
  test::temp_dir dir{"conveyor_gguf_files"};
  auto missing = gguf_file::open(dir.file("absent.gguf"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message,
            dir.file("absent.gguf") + ": cannot open the file (No such file or directory)");
  auto directory = gguf_file::open(dir.path());
  ASSERT_FALSE(directory);
  EXPECT_EQ(directory.error().message, dir.path() + ": not a regular file");
  write_bytes(dir.file("empty.gguf"), "");
  EXPECT_EQ(gguf_file::open(dir.file("empty.gguf")).error().message,
            dir.file("empty.gguf") + ": too short for a GGUF file: 0 bytes");
}
