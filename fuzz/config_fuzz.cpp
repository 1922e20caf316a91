// Fuzz target: the configuration loader on arbitrary TOML text. Every input either loads into a
// configuration that validates and survives a round trip through to_toml, or gives an error
// with a message.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "config/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  std::string_view text{reinterpret_cast<const char*>(data), size};
  auto cfg = config::load_string(text, "fuzz.toml");
  if (!cfg) {
    if (message_of(cfg.error()).empty()) std::abort();  // every refusal says why
    return 0;
  }
  // What loaded renders back to TOML that loads to an equal configuration.
  auto again = config::load_string(config::to_toml(*cfg), "round-trip.toml");
  if (!again || *again != *cfg) {
    std::fprintf(stderr, "round trip failed: %s\n",
                 again ? "configurations differ" : message_of(again.error()).c_str());
    std::abort();
  }
  return 0;
}
