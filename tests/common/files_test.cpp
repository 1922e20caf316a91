// is_regular_file: regular files, through links, and nothing else.
#include "common/files.hpp"

#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.hpp"

namespace conveyor {

namespace {

TEST(files, is_regular_file_only_for_regular_files) {
  test::temp_dir dir{"conveyor_files_test"};
  const auto file = dir.file("weights.bin");
  std::ofstream{file} << "x";
  EXPECT_TRUE(is_regular_file(file));
  std::ofstream{dir.file("empty")};
  EXPECT_TRUE(is_regular_file(dir.file("empty")));
  EXPECT_FALSE(is_regular_file(dir.path()));
  EXPECT_FALSE(is_regular_file(dir.file("missing.json")));
  EXPECT_FALSE(is_regular_file(""));
  EXPECT_FALSE(is_regular_file("/dev/null"));
}

TEST(files, is_regular_file_follows_symbolic_links) {
  test::temp_dir dir{"conveyor_files_test"};
  std::ofstream{dir.file("config.json")} << "{}";
  ASSERT_EQ(::symlink(dir.file("config.json").c_str(), dir.file("link.json").c_str()), 0);
  EXPECT_TRUE(is_regular_file(dir.file("link.json")));
  ASSERT_EQ(::symlink(dir.file("gone").c_str(), dir.file("dangling").c_str()), 0);
  EXPECT_FALSE(is_regular_file(dir.file("dangling")));
  ASSERT_EQ(::symlink(dir.path().c_str(), dir.file("folder").c_str()), 0);
  EXPECT_FALSE(is_regular_file(dir.file("folder")));
}

}  // namespace

}  // namespace conveyor
