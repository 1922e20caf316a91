// What one rendering of a chat template may spend (render_limits) and what it has spent: the
// work it does, the loop iterations it runs, the size and nesting of the values it builds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "chat/chat_template.hpp"
#include "chat/value.hpp"

namespace conveyor::chat {

/// a * b, saturating at SIZE_MAX.
std::size_t saturating_product(std::size_t a, std::size_t b);

/// The limits of one rendering and its spending against them. A method that finds a limit
/// passed throws template_error naming the limit and the template line.
class render_budget {
 public:
  explicit render_budget(const render_limits& limits) : limits_(limits) {}

  const render_limits& limits() const { return limits_; }

  /// Counts `units` of work (see render_limits::max_work).
  void charge(std::size_t units, int line);

  /// Counts `n` loop iterations.
  void count_iterations(int64_t n, int line);

  /// Refuses a value larger than max_output_bytes.
  [[noreturn]] void too_large(int line) const;

  /// Refuses, before it is built, a value that would weigh `weight`.
  void will_weigh(std::size_t weight, int line) const;

  /// A value an expression built: within the size and nesting limits, its making counted.
  value built(value v, int line);
  value built_string(std::string s, int line) { return built(value{std::move(s)}, line); }

  /// Appends `piece` to a string being built.
  void append_text(std::string& out, std::string_view piece, int line) const;

  /// Appends str(v) to a string being built.
  void append(std::string& out, const value& v, int line) const;

  /// str(v), built.
  std::string text(const value& v, int line);

 private:
  render_limits limits_;
  int64_t iterations_ = 0;
  std::size_t work_ = 0;
};

}  // namespace conveyor::chat
