// Where Conveyor's own files are at run time (the default model, its tokenizer, the default
// configuration, the SentencePiece shim): found from the running executable, never compiled in,
// so that an installed or moved binary finds them (see cmake/ConveyorInstall.cmake).
#pragma once

#include <string>
#include <string_view>

namespace conveyor {

/// The default model, relative to `data_dir()` (and to a source checkout): the one definition
/// that the configuration, `conveyor generate` and the benchmarks use.
inline constexpr std::string_view default_model_path = "models/stories260K/stories260K.bin";

/// The tokenizer of the default model, relative like `default_model_path`.
inline constexpr std::string_view default_tokenizer_path = "models/stories260K/tok512.model";

/// The folder of the running executable (from /proc/self/exe); "" when it cannot be read.
std::string executable_dir();

/// The prefix Conveyor runs from: the nearest of the executable folder's parent, grandparent
/// and great-grandparent that holds `share/conveyor`. That is PREFIX for an installed
/// PREFIX/bin/conveyor, and the build folder for a program of the build tree, which mirrors the
/// installed layout. "" when none does. Found once per process.
std::string install_prefix();

/// PREFIX/share/conveyor: the default model (under models/) and configuration (conveyor.toml);
/// "" without a prefix.
std::string data_dir();

/// PREFIX/lib/conveyor: Conveyor's private libraries (the SentencePiece shim); "" without a
/// prefix.
std::string private_library_dir();

/// A file or folder named by a user or the configuration: `path` itself when it is absolute,
/// empty or exists (a relative path is relative to the working directory); else the same
/// relative path under `data_dir()` when that exists (so that the default
/// "models/stories260K/..." works from any directory); else `path` unchanged.
std::string resolve_data_path(const std::string& path);

}  // namespace conveyor
