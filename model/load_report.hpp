// The timing part of a model's start-up log line, shared by the loaders of model files.
// Torch-free.
#pragma once

#include <chrono>
#include <string>

namespace conveyor::model {

/// "opened in A ms, read and packed in B ms; peak resident memory C MiB" for a load that began
/// at `start`, had its files open and checked at `opened` and its network built at `done`.
std::string load_report(std::chrono::steady_clock::time_point start,
                        std::chrono::steady_clock::time_point opened,
                        std::chrono::steady_clock::time_point done);

}  // namespace conveyor::model
