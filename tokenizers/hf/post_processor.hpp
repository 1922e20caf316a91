// tokenizer.json "post_processor": the special tokens put around an encoded single sequence
// (TemplateProcessing; ByteLevel adds none; Sequence of these).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/error.hpp"

namespace conveyor::tokenizers::hf {

/// The ids before and after the text of a single sequence.
struct sequence_template {
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;
  /// Whether the file has a post-processor that decides (false when null).
  bool present = false;
};

/// Parses the "post_processor" value; errors name `origin` and the unsupported type.
expected<sequence_template> parse_post_processor(const nlohmann::json& value,
                                                 const std::string& origin);

}  // namespace conveyor::tokenizers::hf
