// Open-loop replay of a workload through a pipeline spawned in this process.
#pragma once

#include <string>

#include <caf/fwd.hpp>

#include "bench/output_formats.hpp"
#include "bench/sampling_fields.hpp"
#include "bench/stats.hpp"
#include "bench/workload.hpp"
#include "common/error.hpp"
#include "config/config.hpp"

namespace conveyor::bench {

/// Spawns a fresh pipeline from `cfg` with `batcher.policy` set to `policy` (and the periodic
/// metrics log off), sends each request at t0 + arrival_s from this thread, whatever earlier
/// requests do, with a collector sink that stamps each chunk and the end; waits for every
/// request to end, reads batch size, padding fraction and busy ratio from the pipeline's
/// metrics snapshot, and stops the pipeline. Each request samples with `sampling`'s fields where
/// set, else the configuration's `[generation]` ones, and request i is seeded i + 1. Synthetic
/// models (random weights) always get `ignore_eos`, so that they generate exactly max_tokens;
/// others when `sampling` asks for it. The requests that `formats` names (`constrained`) ask for
/// `bench_constraint()`. `rate` only labels the summary.
expected<run_summary> run_in_process(caf::actor_system& system, config::pipeline cfg,
                                     const std::string& policy, const workload& requests,
                                     double rate, run_progress& progress,
                                     const sampling_fields& sampling = {},
                                     const output_formats& formats = {});

}  // namespace conveyor::bench
