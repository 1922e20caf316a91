// A fresh folder for one test, removed with its contents when the object goes out of scope.
//
// Made with mkdtemp and removed with nftw, not std::filesystem: built with GCC 13 against the
// PyTorch wheel's libtorch.so (the CUDA build on a GPU machine), std::filesystem::remove_all
// binds to the copy that libtorch.so exports, built by another compiler, and crashed there. The
// directory iterators it walks with are avoided too (not seen to crash, but the same code); the
// tests' other std::filesystem calls (paths, exists, file_size) passed there.
#pragma once

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/files.hpp"

namespace conveyor::test {

class temp_dir {
 public:
  /// A new folder named `<tag>_XXXXXX` under $TMPDIR (or /tmp): unique across the processes
  /// in which ctest runs a file's tests in parallel.
  explicit temp_dir(const std::string& tag = "conveyor_test") {
    const char* base = std::getenv("TMPDIR");
    std::string name = std::string{base && *base ? base : "/tmp"} + "/" + tag + "_XXXXXX";
    if (::mkdtemp(name.data()) == nullptr)
      throw std::runtime_error("temp_dir: mkdtemp failed for " + name);
    path_ = name;
  }
  ~temp_dir() {
    ::nftw(path_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::string& path() const { return path_; }
  /// The path of `name` inside the folder.
  std::string file(const std::string& name) const { return path_ + "/" + name; }

  /// Copies the file `from` into the folder as `name`.
  void copy_in(const std::string& from, const std::string& name) const {
    std::ifstream in(from, std::ios::binary);
    std::ofstream out(file(name), std::ios::binary | std::ios::trunc);
    if (in && in.peek() != std::ifstream::traits_type::eof()) out << in.rdbuf();
    if (!in || !out) throw std::runtime_error("temp_dir: cannot copy " + from);
  }

  /// Copies the regular files of `source` (not its subfolders) into the folder.
  void copy_files_of(const std::string& source) const {
    DIR* d = ::opendir(source.c_str());
    if (d == nullptr) throw std::runtime_error("temp_dir: cannot open " + source);
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d))
      if (conveyor::is_regular_file(source + "/" + e->d_name)) names.emplace_back(e->d_name);
    ::closedir(d);
    for (const auto& name : names) copy_in(source + "/" + name, name);
  }

 private:
  static int remove_entry(const char* p, const struct stat*, int, struct FTW*) {
    return std::remove(p);
  }
  std::string path_;
};

}  // namespace conveyor::test
