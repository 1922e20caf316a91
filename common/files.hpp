// Questions about files on disk that several folders ask.
#pragma once

#include <string>

namespace conveyor {

/// Whether `path` names a regular file, following symbolic links; false when it cannot be
/// looked at.
bool is_regular_file(const std::string& path);

}  // namespace conveyor
