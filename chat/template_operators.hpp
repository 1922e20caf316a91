// Python's operators on template values, as Jinja applies them: arithmetic on 64-bit integers
// (checked) and floats, comparison, membership, concatenation and repetition, subscripts,
// slices and iteration. What each builds, compares or walks is counted against the rendering's
// budget; what Jinja would fail on throws template_error naming the line.
#pragma once

#include <cstdint>
#include <string>

#include "chat/render_budget.hpp"
#include "chat/value.hpp"

namespace conveyor::chat {

/// `a op b` for a binary operator of the syntax tree: + - * / // % ** ~ == != < <= > >= in
/// "not in". Integer arithmetic whose result does not fit in 64 bits is an error.
value binary_operator(const std::string& op, const value& a, const value& b, render_budget& budget,
                      int line);

/// -v of a number (or a boolean).
value negative(const value& v, int line);

/// Python's ==, its comparisons counted (at most the lighter side's weight).
bool equal(const value& a, const value& b, render_budget& budget, int line);

/// Python's `item in container` for a string (a substring), a list or a map (a key); false in
/// an undefined value.
bool contains(const value& container, const value& item, render_budget& budget, int line);

/// base[key]: a map's value, a list's item or a string's character (negative indices from the
/// end); undefined when there is none. An undefined base is an error.
value subscript(const value& base, const value& key, render_budget& budget, int line);

/// base[start:stop:step] of a list or string; an omitted bound is undefined (or none).
value slice(const value& base, const value& start, const value& stop, const value& step,
            render_budget& budget, int line);

/// The items of an iterable: a list's own, a map's keys, a string's characters; none for
/// undefined. The list is built (and counted) unless `v` is a list.
value items_of(const value& v, render_budget& budget, int line);

/// The same, walked: counts 8 units per item.
value walk(const value& v, render_budget& budget, int line);

/// Fails: the result of `op` does not fit in 64 bits.
[[noreturn]] void integer_overflow(const std::string& op, int line);

}  // namespace conveyor::chat
