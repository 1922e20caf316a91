// One request as its sink sees it across runs. The executor tells the batcher that a request
// streams before the sink hears its first chunk; a remote executor killed between the two
// messages leaves a request the batcher fails with executor_lost (it streamed, as far as the
// batcher knows) while its sink heard nothing. A sink that kept the request can run it again
// with a fresh id and the same arrival (its deadline stays): this class decides when.
#pragma once

#include <cstdint>

#include "pipeline/request.hpp"

namespace conveyor::pipeline {

/// What a sink does with a message of its request.
enum class rerun_verdict : uint8_t {
  /// Pass it on: it belongs to the run in progress.
  deliver,
  /// Drop it: it belongs to an earlier run (a chunk that was late, or that run's end).
  ignore,
  /// The run was lost before anything was heard: send `rerun(id)` to the pipeline instead.
  rerun,
};

/// Tracks the runs of one request for its sink. Plain and single-threaded (the sink's).
class rerun_tracker {
 public:
  /// The request as first sent (its id set), and how many times it may run again.
  rerun_tracker(generate_request request, int32_t max_reruns);

  /// The id of the run in progress.
  request_id current() const { return request_.id; }

  /// How many times the request ran again.
  int32_t reruns() const { return reruns_; }

  /// A chunk: `deliver` for the run in progress (after which the request never runs again),
  /// `ignore` for an earlier run's.
  rerun_verdict on_chunk(const token_chunk& chunk);

  /// The end of a run: `rerun` when the run in progress failed with executor_lost before any
  /// chunk, was not cancelled, and reruns are left; `ignore` for an earlier run's end;
  /// otherwise `deliver` (the request's end).
  rerun_verdict on_result(const request_result& result);

  /// The request cannot run again (it was cancelled).
  void cancelled() { cancelled_ = true; }

  /// The request to send again, as run `id` (after `on_result` said `rerun`).
  generate_request rerun(request_id id);

 private:
  generate_request request_;
  int32_t max_reruns_;
  int32_t reruns_ = 0;
  bool heard_ = false;
  bool cancelled_ = false;
};

}  // namespace conveyor::pipeline
