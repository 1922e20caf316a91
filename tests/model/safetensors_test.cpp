// The safetensors reader: dtypes converted exactly, sharded directories, and every check of the
// header (length, JSON, dtype, shape, offsets in bounds and not overlapping) naming the file and
// the tensor.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/hf_weights.hpp"
#include "model/model_info.hpp"
#include "model/safetensors.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/model_files.hpp"

using namespace conveyor;
using namespace conveyor::model;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// A safetensors file: the 8-byte length, `header` as given, then `data`.
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::string bytes(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((n >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes << header << data;
}

std::string bytes_of(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::string open_error(const std::string& path) {
  auto f = safetensors_file::open(path);
  return f ? std::string{"(opened)"} : message_of(f.error());
}

}  // namespace

TEST(safetensors, reads_f32_f16_and_bf16_exactly) {
  test::temp_dir dir{"conveyor_safetensors"};
  const std::string path = dir.path() + "/t.safetensors";
  // 1.5, -2, 0.099975586 (f16 0x2E66), a subnormal f16 (0x0001 = 2^-24); bf16 of 1.5 and -3.
  const std::vector<float> f32{1.5f, -2.0f};
  const std::string f16("\x00\x3e\x00\xc0\x66\x2e\x01\x00", 8);
  const std::string bf16("\xc0\x3f\x40\xc0", 4);
  json h{{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
         {"b", {{"dtype", "F16"}, {"shape", {2, 2}}, {"data_offsets", {8, 16}}}},
         {"c", {{"dtype", "BF16"}, {"shape", {2}}, {"data_offsets", {16, 20}}}},
         {"__metadata__", {{"format", "pt"}}}};
  write_raw(path, h.dump(), bytes_of(f32) + f16 + bf16);
  auto f = safetensors_file::open(path);
  ASSERT_TRUE(f) << message_of(f.error());
  EXPECT_EQ((*f)->tensors().size(), 3u);
  float out[4];
  ASSERT_FALSE((*f)->read_f32("a", out));
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -2.0f);
  ASSERT_FALSE((*f)->read_f32("b", out));
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 0.0999755859375f);
  EXPECT_EQ(out[3], std::ldexp(1.0f, -24));
  ASSERT_FALSE((*f)->read_f32("c", out));
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -3.0f);
  EXPECT_EQ((*f)->find("b")->shape, (std::vector<int64_t>{2, 2}));
}

TEST(safetensors, header_errors_name_the_file_and_the_tensor) {
  test::temp_dir dir{"conveyor_safetensors"};
  const std::string path = dir.path() + "/bad.safetensors";
  const std::string data = bytes_of({1, 2, 3, 4});
  auto expect = [&](const std::string& header, const std::string& body, const std::string& want) {
    write_raw(path, header, body);
    const auto msg = open_error(path);
    EXPECT_NE(msg.find(path + ": "), std::string::npos) << msg;
    EXPECT_NE(msg.find(want), std::string::npos) << "want '" << want << "' in: " << msg;
  };
  auto entry = [](const char* dtype, json shape, json offsets) {
    return json{{"dtype", dtype}, {"shape", shape}, {"data_offsets", offsets}};
  };
  expect("{\"w\": {\"dtype\": \"F32\",", data, "malformed JSON header");
  expect(json{{"w", entry("F32", {4}, {0, 20})}}.dump(), data,
         "tensor 'w': data_offsets [0,20] run past the end of the data (16 bytes; truncated");
  expect(json{{"w", entry("F32", {4}, {0, 16})}}.dump(), data.substr(0, 10),
         "tensor 'w': data_offsets [0,16] run past the end of the data (10 bytes");
  expect(json{{"w", entry("F32", {3}, {0, 16})}}.dump(), data,
         "tensor 'w': data_offsets [0,16] hold 16 bytes but F32 [3] needs 12");
  expect(json{{"v", entry("F32", {2}, {0, 8})}, {"w", entry("F32", {2}, {4, 12})}}.dump(), data,
         "tensors 'v' and 'w' overlap");
  expect(json{{"w", entry("F32", {2}, {8, 0})}}.dump(), data, "end before they begin");
  expect(json{{"w", entry("Q4", {2}, {0, 8})}}.dump(), data, "tensor 'w': unknown dtype 'Q4'");
  expect(json{{"w", entry("F32", {-2}, {0, 8})}}.dump(), data, "tensor 'w': 'shape'");
  expect(json{{"w", {{"dtype", "F32"}, {"shape", {2}}}}}.dump(), data,
         "tensor 'w': 'data_offsets' is not two non-negative integers");
  expect("[1, 2]", data, "the JSON header is not an object");
  // A header length that runs past the file.
  {
    std::string bytes(8, '\0');
    bytes[0] = char(0xff);
    bytes[1] = char(0xff);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes << "{}";
    EXPECT_NE(open_error(path).find("header length 65535 runs past the end of the 10-byte file"),
              std::string::npos);
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "abc";
  EXPECT_NE(open_error(path).find("too short"), std::string::npos);
  EXPECT_NE(open_error(dir.path() + "/absent.safetensors").find("cannot open"), std::string::npos);
}

TEST(safetensors, an_empty_tensor_reads_as_nothing) {
  // Found by fuzz/safetensors_fuzz.cpp: reading [0] elements copied from a null pointer.
  test::temp_dir dir{"conveyor_safetensors"};
  const std::string path = dir.path() + "/empty.safetensors";
  write_raw(path,
            json{{"e", {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {0, 0}}}},
                 {"b", {{"dtype", "BF16"}, {"shape", {2, 0}}, {"data_offsets", {0, 0}}}}}
                .dump(),
            "");
  auto f = safetensors_file::open(path);
  ASSERT_TRUE(f) << message_of(f.error());
  EXPECT_EQ((*f)->find("e")->elements(), 0);
  EXPECT_FALSE((*f)->read_f32("e", nullptr));
  EXPECT_FALSE((*f)->read_f32("b", nullptr));
}

TEST(safetensors, an_unsupported_dtype_is_refused_when_read) {
  test::temp_dir dir{"conveyor_safetensors"};
  const std::string path = dir.path() + "/ints.safetensors";
  write_raw(path,
            json{{"model.embed_tokens.weight",
                  {{"dtype", "I32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}}
                .dump(),
            std::string(8, '\0'));
  auto f = safetensors_file::open(path);
  ASSERT_TRUE(f);
  float out[2];
  const auto msg = message_of((*f)->read_f32("model.embed_tokens.weight", out));
  EXPECT_NE(msg.find(path + ": tensor 'model.embed_tokens.weight' has unsupported dtype I32"),
            std::string::npos)
      << msg;
}

TEST(safetensors, a_truncated_model_file_names_the_tensor) {
  test::temp_dir dir{"conveyor_safetensors"};
  const std::string model = test::source_path("tests/fixtures/hf_models/llama_gqa");
  dir.copy_files_of(model);
  const std::string file = dir.path() + "/model.safetensors";
  ASSERT_EQ(::truncate(file.c_str(), off_t(fs::file_size(file) - 100)), 0);
  auto info = read_hf_config(dir.path());
  ASSERT_TRUE(info);
  auto w = load_hf_weights(*info);
  ASSERT_FALSE(w);
  const auto msg = message_of(w.error());
  EXPECT_NE(msg.find(file + ": tensor '"), std::string::npos) << msg;
  EXPECT_NE(msg.find("run past the end of the data"), std::string::npos) << msg;
}

TEST(safetensors, a_sharded_directory_reads_like_one_file) {
  // Splits llama_gqa's model.safetensors into two shards with an index, as save_pretrained does
  // for large models.
  test::temp_dir dir{"conveyor_safetensors"};
  const std::string model = test::source_path("tests/fixtures/hf_models/llama_gqa");
  for (const char* name : {"config.json", "generation_config.json"})
    dir.copy_in(model + "/" + name, name);
  auto whole = safetensors_file::open(model + "/model.safetensors");
  ASSERT_TRUE(whole);
  json shard[2] = {json::object(), json::object()};
  std::string data[2];
  json index{{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  int i = 0;
  for (const auto& [name, t] : (*whole)->tensors()) {
    const int s = i++ % 2;
    std::vector<float> values(size_t(t.elements()));
    ASSERT_FALSE((*whole)->read_f32(name, values.data()));
    const auto begin = data[s].size();
    data[s] += bytes_of(values);
    shard[s][name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {begin, data[s].size()}}};
    index["weight_map"][name] = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
  }
  for (int s = 0; s < 2; ++s)
    write_raw(dir.path() + "/model-0000" + std::to_string(s + 1) + "-of-00002.safetensors",
              shard[s].dump(), data[s]);
  std::ofstream(dir.path() + "/model.safetensors.index.json") << index.dump();
  auto info = read_hf_config(dir.path());
  ASSERT_TRUE(info);
  auto sharded = load_hf_weights(*info);
  ASSERT_TRUE(sharded) << message_of(sharded.error());
  auto one = load_hf_weights(*read_hf_config(model));
  ASSERT_TRUE(one);
  EXPECT_EQ(sharded->wq, one->wq);
  EXPECT_EQ(sharded->w2, one->w2);
  EXPECT_EQ(sharded->wcls, one->wcls);
  // An index naming a shard without the tensor.
  index["weight_map"]["model.norm.weight"] =
      index["weight_map"]["model.norm.weight"] == "model-00001-of-00002.safetensors"
          ? "model-00002-of-00002.safetensors"
          : "model-00001-of-00002.safetensors";
  std::ofstream(dir.path() + "/model.safetensors.index.json", std::ios::trunc) << index.dump();
  auto set = safetensors_set::open(dir.path());
  ASSERT_FALSE(set);
  EXPECT_NE(message_of(set.error())
                .find(dir.path() + "/model.safetensors.index.json: weight_map puts tensor "
                                 "'model.norm.weight' in"),
            std::string::npos)
      << message_of(set.error());
}

TEST(safetensors, halves_to_adjacent_pairs_is_the_inverse_of_the_export_permutation) {
  // Head size 4, two heads, one column: HF rows [a0 a1 b0 b1] (halves a, b) -> [a0 b0 a1 b1].
  std::vector<float> rows{0, 1, 2, 3, 10, 11, 12, 13};
  adjacent_pairs_from_halves(rows.data(), 2, 4, 1);
  EXPECT_EQ(rows, (std::vector<float>{0, 2, 1, 3, 10, 12, 11, 13}));
}
