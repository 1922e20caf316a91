// Jinja's filters and tests that chat templates use (`x | trim`, `x is defined`) and the global
// function range(). Each evaluates its arguments as it reads them and counts what it builds,
// compares or walks against the rendering's budget.
#pragma once

#include <cstddef>
#include <string>

#include "chat/builtin_call.hpp"
#include "chat/value.hpp"

namespace conveyor::chat {

/// `subject | name(arguments)`: the filter `name` (that of `call.e`, or one that `map` applies
/// to each item); an error for a filter Conveyor does not support.
value apply_filter(const std::string& name, const value& subject, const builtin_call& call);

/// `subject is name(argument)`: the test `name`, whose argument (if it takes one) is argument
/// `position` of the call; an error for a test Conveyor does not support.
bool apply_test(const std::string& name, const value& subject, const builtin_call& call,
                std::size_t position);

/// range(stop) / range(start, stop[, step]) of `call.e`'s arguments, at most 100000 items as
/// in jinja2's sandbox.
value range(const builtin_call& call);

}  // namespace conveyor::chat
