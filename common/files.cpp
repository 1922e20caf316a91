// Questions about files on disk.
#include "common/files.hpp"

#include <sys/stat.h>

namespace conveyor {

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace conveyor
