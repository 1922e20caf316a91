// Stop strings in a stream of text: emit what cannot be part of a stop string, hold the rest.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::sampling {

/// Watches a stream of text chunks for stop strings, as OpenAI's `stop` parameter does: the
/// emitted text ends right before the first stop string, which is not emitted. A tail of the
/// text that could be the start of a stop string is held back until it is known not to be one.
/// The first stop string to complete wins (the one that ends first; of those ending at the same
/// place, the one that starts first), so the result does not depend on how the text is cut into
/// chunks. One instance per stream; not thread-safe.
class stop_string_matcher {
 public:
  /// Makes a matcher for `stop_strings`; empty ones are ignored. A matcher made not `armed`
  /// finds no stop string until `arm()`, but holds back what could begin one, so that a stop
  /// string that begins before `arm()` and ends after it is found (min_tokens).
  explicit stop_string_matcher(std::vector<std::string> stop_strings, bool armed = true);

  /// From now on a stop string that ends in the pushed text stops the stream, wherever it began.
  void arm() { armed_ = true; }

  /// Feeds a chunk; returns the text that is now safe to emit (possibly ""). Once stopped,
  /// returns "" for every chunk.
  std::string push(std::string_view chunk);

  /// Ends the stream: returns the held-back text ("" when stopped).
  std::string flush();

  /// Whether a stop string has appeared.
  bool stopped() const { return stopped_; }

  /// The stop string that appeared, or "" when none did.
  const std::string& matched() const { return matched_; }

  /// Number of bytes held back.
  size_t held_bytes() const { return held_.size(); }

 private:
  /// Returns the length of the longest suffix of `held_` that is a proper prefix of a stop
  /// string.
  size_t longest_partial_match() const;

  /// The non-empty stop strings.
  std::vector<std::string> stop_strings_;
  /// Text received but not emitted: a possible start of a stop string.
  std::string held_;
  bool stopped_ = false;
  bool armed_ = true;
  std::string matched_;
};

}  // namespace conveyor::sampling
