// The timing part of a load's log line.
#include "model/load_report.hpp"

#include "common/memory.hpp"

namespace conveyor::model {

std::string load_report(std::chrono::steady_clock::time_point start,
                        std::chrono::steady_clock::time_point opened,
                        std::chrono::steady_clock::time_point done) {
  using ms = std::chrono::milliseconds;
  return "opened in " + std::to_string(std::chrono::duration_cast<ms>(opened - start).count()) +
         " ms, read and packed in " +
         std::to_string(std::chrono::duration_cast<ms>(done - opened).count()) +
         " ms; peak resident memory " + std::to_string(peak_resident_bytes() >> 20) + " MiB";
}

}  // namespace conveyor::model
