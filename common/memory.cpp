// Peak resident memory from /proc/self/status.
#include "common/memory.hpp"

#include <cstdio>
#include <cstring>

namespace conveyor {

int64_t peak_resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  long long kib = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr)
    if (std::strncmp(line, "VmHWM:", 6) == 0) {
      std::sscanf(line + 6, "%lld", &kib);
      break;
    }
  std::fclose(f);
  return int64_t(kib) * 1024;
}

}  // namespace conveyor
