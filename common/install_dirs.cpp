// The run-time location of Conveyor's files, from /proc/self/exe.
#include "common/install_dirs.hpp"

#include <filesystem>
#include <system_error>

namespace conveyor {

namespace fs = std::filesystem;

namespace {

bool present(const fs::path& p) {
  std::error_code err;
  return fs::exists(p, err);
}

std::string find_prefix() {
  const auto exe_dir = executable_dir();
  if (exe_dir.empty()) return {};
  fs::path dir = fs::path{exe_dir};
  // PREFIX/bin/conveyor; in the build tree build/apps/conveyor, build/tests/SUITE/SUITE_tests,
  // build/apps/examples/EXAMPLE.
  for (int up = 0; up < 3 && dir.has_parent_path() && dir != dir.root_path(); ++up) {
    dir = dir.parent_path();
    if (present(dir / "share" / "conveyor")) return dir.string();
  }
  return {};
}

}  // namespace

std::string executable_dir() {
  std::error_code err;
  const auto exe = fs::read_symlink("/proc/self/exe", err);
  if (err || exe.empty()) return {};
  return exe.parent_path().string();
}

std::string install_prefix() {
  static const std::string prefix = find_prefix();
  return prefix;
}

std::string data_dir() {
  const auto prefix = install_prefix();
  return prefix.empty() ? std::string{} : prefix + "/share/conveyor";
}

std::string private_library_dir() {
  const auto prefix = install_prefix();
  return prefix.empty() ? std::string{} : prefix + "/lib/conveyor";
}

std::string resolve_data_path(const std::string& path) {
  if (path.empty() || path.front() == '/' || present(path)) return path;
  const auto data = data_dir();
  if (data.empty()) return path;
  auto candidate = data + "/" + path;
  return present(candidate) ? candidate : path;
}

}  // namespace conveyor
