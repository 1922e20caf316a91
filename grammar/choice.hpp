// The grammar of a choice among strings (vLLM's `structured_outputs.choice`).
#pragma once

#include <string>
#include <vector>

namespace conveyor::grammar {

/// The EBNF grammar (xgrammar's dialect, root rule `root`) whose sentences are exactly the
/// strings of `choices`, byte for byte: root ::= "a" | "b" with each string escaped.
std::string choice_ebnf(const std::vector<std::string>& choices);

}  // namespace conveyor::grammar
