// The output format a bench run gives a share of its requests (--json-schema-fraction): which
// requests, the fixed JSON schema they ask for, and how it goes into a request in process or over
// HTTP. The rest ask for no format, so that a run shows what formatted neighbours cost them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "sampling/structured_output.hpp"

namespace conveyor::bench {

/// Which requests of a run ask for an output format.
struct output_formats {
  /// Share of the requests that ask for `bench_json_schema`, in [0, 1]; 0 leaves all free.
  double json_schema_fraction = 0;
};

/// The schema: an object with a string, an integer, a number, a boolean, an enum and an array
/// of strings, all required (the one of docs/benchmarks.md's "Structured outputs"). Its
/// properties are in the order of their names, the order a JSON body without ordered keys sends.
const std::string& bench_json_schema();

/// The problem with the fraction, named by its flag ("--json-schema-fraction: must be in [0, 1],
/// got 2"); nullopt when it is fine.
std::optional<std::string> check(const output_formats& formats);

/// Whether request `index` (its place in the workload) asks for the schema: spread evenly, the
/// k-th of every 1 / fraction, so that ceil(n * fraction) or floor(n * fraction) of the first n
/// do (exactly n * fraction where that is whole).
bool constrained(const output_formats& formats, std::size_t index);

/// The schema as a request's constraint in process (its field "response_format", as the server
/// names it).
sampling::structured_output bench_constraint();

/// Adds `"response_format": {"type": "json_schema", "json_schema": {"name": "bench", "schema":
/// ...}}` to the JSON body of a request.
void add_format_to_body(nlohmann::json& body);

/// The formats as JSON for a report's settings: {"json_schema_fraction", "json_schema"}, or an
/// empty object when no request asks for one.
nlohmann::json to_json(const output_formats& formats);

}  // namespace conveyor::bench
