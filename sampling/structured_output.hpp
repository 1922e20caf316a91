// The format a request's output must have (structured outputs): a JSON schema, a regular
// expression, one of a list of strings or a grammar. It travels inside sampling_params from the
// server's parser to the executor, local or remote; grammar/ compiles it into the token masks
// that the sampler applies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace conveyor::sampling {

/// What constrains a request's output. `none` leaves it free.
struct structured_output {
  enum class kind : uint8_t {
    /// No constraint.
    none,
    /// `text` is a JSON schema; the output is one JSON value that fits it, in the compact form
    /// of Python's json.dumps (", " and ": " separators, no other whitespace between tokens).
    json_schema,
    /// `text` is a regular expression the whole output matches.
    regex,
    /// The output is one of `choices`, exactly.
    choice,
    /// `text` is a grammar in xgrammar's EBNF (GBNF-like; its root rule is `root`).
    grammar,
  };

  kind type = kind::none;
  std::string text;
  std::vector<std::string> choices;
  /// The request field the constraint came from ("response_format", "structured_outputs.json",
  /// "tool_choice"): errors about it name this field.
  std::string field;

  bool active() const { return type != kind::none; }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, structured_output& x) {
  return f(x.type, x.text, x.choices, x.field);
}

}  // namespace conveyor::sampling
