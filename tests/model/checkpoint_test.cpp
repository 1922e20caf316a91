// Every way a checkpoint file can be wrong gives an error naming the file and the sizes.
#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "model/causal_lm.hpp"
#include "model/checkpoint.hpp"
#include "tests/support/model_files.hpp"

using namespace conveyor;
using namespace conveyor::model;

namespace {

std::string temp_path(const std::string& name) {
  return std::string{CONVEYOR_BINARY_DIR} + "/checkpoint_test_" + name;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string write_file(const std::string& name, const std::string& bytes) {
  auto path = temp_path(name);
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  return path;
}

std::string load_error(const std::string& path) {
  auto w = load_llama2c_checkpoint(path);
  EXPECT_FALSE(w);
  return w ? std::string{} : message_of(w.error());
}

}  // namespace

TEST(checkpoint, loads_stories260k) {
  auto w = load_llama2c_checkpoint(test::stories_model());
  ASSERT_TRUE(w) << message_of(w.error());
  EXPECT_EQ(w->shape, (llama_shape{64, 172, 5, 8, 4, 512, 512, true}));
  EXPECT_EQ(w->token_embedding.size(), 512u * 64);
  EXPECT_EQ(w->wk.size(), 5u * 32 * 64);
  EXPECT_TRUE(w->wcls.empty());
  EXPECT_FALSE(w->synthetic);
}

TEST(checkpoint, missing_file) {
  EXPECT_EQ(load_error("/nonexistent/model.bin"),
            "/nonexistent/model.bin: cannot open model file (no such file)");
}

TEST(checkpoint, truncated_file) {
  auto bytes = read_all(test::stories_model());
  auto path = write_file("truncated.bin", bytes.substr(0, bytes.size() - 100));
  EXPECT_EQ(load_error(path),
            path +
                ": wrong size for a llama2.c checkpoint with dim=64 hidden_dim=172 n_layers=5 "
                "n_heads=8 n_kv_heads=4 vocab_size=512 seq_len=512: expected 1056540 bytes, "
                "found 1056440 (truncated)");
}

TEST(checkpoint, padded_file) {
  auto path = write_file("padded.bin", read_all(test::stories_model()) + "extra");
  EXPECT_EQ(load_error(path),
            path +
                ": wrong size for a llama2.c checkpoint with dim=64 hidden_dim=172 n_layers=5 "
                "n_heads=8 n_kv_heads=4 vocab_size=512 seq_len=512: expected 1056540 bytes, "
                "found 1056545 (extra data)");
}

TEST(checkpoint, too_short_for_a_header) {
  auto path = write_file("short.bin", "abc");
  EXPECT_EQ(load_error(path),
            path + ": too short for a llama2.c header: 3 bytes, need at least 28");
}

TEST(checkpoint, foreign_file) {
  // A text file: its first bytes read as huge or negative header fields.
  auto path = write_file("foreign.bin", std::string(4096, 'x'));
  auto msg = load_error(path);
  EXPECT_NE(msg.find(path + ": not a llama2.c checkpoint ("), std::string::npos) << msg;
  // The tokenizer's own file is no checkpoint either.
  auto tok = test::source_path("models/stories260K/tok512.model");
  EXPECT_NE(load_error(tok).find("not a llama2.c checkpoint"), std::string::npos);
}

TEST(checkpoint, inconsistent_header) {
  int32_t header[7] = {64, 172, 5, 6, 4, 512, 512};  // 64 is no multiple of 6 heads
  auto path = write_file("heads.bin", std::string(reinterpret_cast<char*>(header), 28));
  EXPECT_EQ(load_error(path),
            path +
                ": not a llama2.c checkpoint (dim is not a multiple of n_heads; header says "
                "dim=64 hidden_dim=172 n_layers=5 n_heads=6 n_kv_heads=4 vocab_size=512 "
                "seq_len=512)");
}

TEST(checkpoint, directory_is_not_a_file) {
  EXPECT_EQ(load_error(test::source_path("models")),
            test::source_path("models") + ": not a regular file");
}

TEST(checkpoint, load_model_reports_the_same_errors) {
  runtime_options opt;
  auto m = load_model("/nonexistent/model.bin", opt);
  ASSERT_FALSE(m);
  EXPECT_EQ(code_of(m.error()), ec::bad_file);
  auto s = load_model("synthetic:nope", opt);
  ASSERT_FALSE(s);
  EXPECT_EQ(message_of(s.error()),
            "unknown synthetic model 'synthetic:nope'; known: synthetic:s15m, synthetic:s42m, "
            "synthetic:s1b");
}
