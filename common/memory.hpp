// What this process holds in memory, for the start-up log.
#pragma once

#include <cstdint>

namespace conveyor {

/// The most memory this process has had resident so far (Linux's VmHWM), in bytes; 0 where it
/// cannot be read.
int64_t peak_resident_bytes();

}  // namespace conveyor
