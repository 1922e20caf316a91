// The CPU time this process has used, all of its threads together: what a run of `conveyor
// bench` costs its own machine, measured over the run (the client's share when the server is
// another process on the same cores).
#pragma once

namespace conveyor::bench {

/// User plus system CPU seconds of this process so far (getrusage RUSAGE_SELF); NaN if unknown.
double process_cpu_seconds();

}  // namespace conveyor::bench
