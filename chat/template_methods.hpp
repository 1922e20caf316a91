// Python's str and dict methods that chat templates call: get, items, keys, values; strip,
// lstrip, rstrip, startswith, endswith, upper, lower, title, capitalize, replace, split.
#pragma once

#include <cstdint>
#include <string>

#include "chat/builtin_call.hpp"
#include "chat/render_budget.hpp"
#include "chat/value.hpp"

namespace conveyor::chat {

/// self.name(arguments) for the method named by `call.e.name`; an error for a method `self`
/// does not have.
value call_method(const value& self, const builtin_call& call);

/// Python's str.replace(old, new, count) (count < 0: all), which Jinja's replace filter calls
/// too. An empty `from` leaves `s` as it is (Python would insert between characters; no
/// template does).
value replace_text(const std::string& s, const std::string& from, const std::string& to,
                   int64_t count, render_budget& budget, int line);

}  // namespace conveyor::chat
