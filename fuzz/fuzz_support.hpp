// What the fuzz targets share: a scratch file per process for readers that take a path, the
// repository's files, and a check that text is well-formed UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <unistd.h>

#include <utf8cpp/utf8.h>

namespace conveyor::fuzz {

/// Writes `data` to this process's scratch file (under $TMPDIR or /tmp) and returns its path.
/// The same path every call, so a run leaves one file behind at most.
inline std::string write_scratch(const uint8_t* data, size_t size, const char* suffix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string{tmp != nullptr && *tmp != '\0' ? tmp : "/tmp"} +
                     "/conveyor-fuzz-" + std::to_string(::getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

/// A file of the repository (CONVEYOR_SOURCE_DIR is compiled into fuzz targets only).
inline std::string source_path(const std::string& relative) {
  return std::string{CONVEYOR_SOURCE_DIR} + "/" + relative;
}

/// Aborts (a finding) unless `text` is well-formed UTF-8 (utfcpp's check: no overlong forms,
/// surrogates or code points above U+10FFFF).
inline void require_utf8(std::string_view text, const char* what) {
  auto bad = utf8::find_invalid(text.begin(), text.end());
  if (bad != text.end()) {
    std::fprintf(stderr, "%s is not UTF-8 at byte %zu of %zu\n", what,
                 size_t(bad - text.begin()), text.size());
    std::abort();
  }
}

}  // namespace conveyor::fuzz
