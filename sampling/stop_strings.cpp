// Streaming stop-string matching.
#include "sampling/stop_strings.hpp"

#include <algorithm>
#include <utility>

namespace conveyor::sampling {

stop_string_matcher::stop_string_matcher(std::vector<std::string> stop_strings, bool armed)
    : stop_strings_(std::move(stop_strings)), armed_(armed) {
  stop_strings_.erase(std::remove_if(stop_strings_.begin(), stop_strings_.end(),
                                     [](const std::string& s) { return s.empty(); }),
                      stop_strings_.end());
}

std::string stop_string_matcher::push(std::string_view chunk) {
  if (stopped_) return {};
  held_ += chunk;
  // Every earlier push left at most a proper prefix of a stop string held, so a stop string
  // found now starts inside `held_` and ends in the new chunk. The first to complete wins.
  // Unarmed, a whole stop string is text like any other.
  size_t best_start = std::string::npos;
  size_t best_end = std::string::npos;
  for (const auto& stop : stop_strings_) {
    if (!armed_) break;
    const size_t start = held_.find(stop);
    if (start == std::string::npos) continue;
    const size_t end = start + stop.size();
    if (end < best_end || (end == best_end && start < best_start)) {
      best_start = start;
      best_end = end;
      matched_ = stop;
    }
  }
  if (best_start != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, best_start);
    held_.clear();
    return out;
  }
  const size_t keep = longest_partial_match();
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string stop_string_matcher::flush() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

size_t stop_string_matcher::longest_partial_match() const {
  size_t best = 0;
  for (const auto& stop : stop_strings_) {
    // Proper prefixes only: a whole stop string would have been found by push().
    for (size_t length = std::min(held_.size(), stop.size() - 1); length > best; --length) {
      if (std::string_view{held_}.substr(held_.size() - length) ==
          std::string_view{stop}.substr(0, length)) {
        best = length;
        break;
      }
    }
  }
  return best;
}

}  // namespace conveyor::sampling
