// Every actor interface of the pipeline in one place: a reader learns the whole protocol here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "pipeline/request.hpp"

namespace conveyor {

// -- atoms ---------------------------------------------------------------------------------------

namespace atom {
using generate = caf::atom_constant<caf::atom("generate")>;
using cancel = caf::atom_constant<caf::atom("cancel")>;
using encode = caf::atom_constant<caf::atom("encode")>;
using pull = caf::atom_constant<caf::atom("pull")>;
using work = caf::atom_constant<caf::atom("work")>;
using step = caf::atom_constant<caf::atom("step")>;
using done = caf::atom_constant<caf::atom("done")>;
using wakeup = caf::atom_constant<caf::atom("wakeup")>;
using drain = caf::atom_constant<caf::atom("drain")>;
using status = caf::atom_constant<caf::atom("status")>;
using prometheus = caf::atom_constant<caf::atom("prometheus")>;
using snapshot = caf::atom_constant<caf::atom("snapshot")>;
using queue_depth = caf::atom_constant<caf::atom("qdepth")>;
using running = caf::atom_constant<caf::atom("running")>;
using flush = caf::atom_constant<caf::atom("flush")>;
using summary = caf::atom_constant<caf::atom("summary")>;
using started = caf::atom_constant<caf::atom("started")>;
using attach = caf::atom_constant<caf::atom("attach")>;
using connect = caf::atom_constant<caf::atom("connect")>;
}  // namespace atom

// -- messages ------------------------------------------------------------------------------------

/// An executor's view of itself when it asks for work.
struct executor_report {
  /// Slots free now (0 while a static batch runs).
  int32_t free_slots = 0;
  /// Sequences admitted and not ended.
  int32_t active = 0;
  /// Requests received from the batcher so far; with the batcher's own count it tells how many
  /// are still on their way.
  uint64_t received = 0;
  /// The executor's name, for logs.
  std::string name;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, executor_report& x) {
  return f(caf::meta::type_name("executor_report"), x.free_slots, x.active, x.received, x.name);
}

/// A snapshot of the pipeline for health checks and tests.
struct pipeline_status {
  uint64_t waiting = 0;
  uint64_t tokenizing = 0;
  uint64_t running = 0;
  uint64_t executors = 0;
  bool draining = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pipeline_status& x) {
  return f(caf::meta::type_name("pipeline_status"), x.waiting, x.tokenizing, x.running, x.executors,
           x.draining);
}

// -- interfaces ----------------------------------------------------------------------------------

/// The SINK of a request: any actor that hears its output. It receives zero or more chunks and
/// then exactly one result.
using sink_actor = caf::typed_actor<
    // New text and tokens of one step.
    caf::reacts_to<token_chunk>,
    // The end: finished, cancelled, expired, rejected or failed.
    caf::reacts_to<request_result>>;

/// A SINK that also stands for its request towards the client (the HTTP server's sink, one per
/// request): it may run its request again under a new id (pipeline/rerun_tracker.hpp), so a
/// cancel goes through it, to whichever run is in progress.
using request_sink_actor = sink_actor::extend<
    // Cancel the request (the run in progress, and no run after it).
    caf::reacts_to<atom::cancel>>;

/// The TOKENIZER actor interface: one worker, or the round-robin pool in front of them.
using tokenizer_actor = caf::typed_actor<
    // Encode a request's prompt (or check its token ids); an error when it cannot fit in the
    // context (prompt_too_long) or holds ids outside the vocabulary (bad_request).
    caf::replies_to<atom::encode, generate_request>::with<sequence_request>>;

/// A work item on its way from the batcher to an executor, which may be on another machine: the
/// request (its `deadline` stamp left 0), what is left of its deadline, and where its output goes.
struct work_item {
  sequence_request request;
  sink_actor sink;
  deadline_left deadline;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, work_item& x) {
  return f(caf::meta::type_name("work_item"), x.request, x.sink, x.deadline);
}

/// The batcher an executor pulls from (defined below): the executor's interface names the
/// batcher's, and the batcher's names the executor's, so one of them goes through this wrapper.
struct batcher_ref;

/// The EXECUTOR actor interface: one per device, owning a model and its KV cache.
using executor_actor = caf::typed_actor<
    // Admit these requests; `true` marks a static batch of the seed policy.
    caf::reacts_to<atom::work, std::vector<work_item>, bool>,
    // Cancel a request at the next step boundary.
    caf::reacts_to<atom::cancel, request_id>,
    // Run one step (sent to itself, so that messages are handled between steps).
    caf::reacts_to<atom::step>,
    // End every running request with the given message and stop taking work.
    caf::reacts_to<atom::drain, std::string>,
    // Pull from this batcher from now on (a remote executor learns its batcher this way); the
    // requests of a previous batcher end and the report starts afresh.
    caf::reacts_to<atom::attach, batcher_ref>>;

/// The PIPELINE actor interface (the batcher is its front): what an embedding system talks to.
using pipeline_actor = caf::typed_actor<
    // Start a request; its output goes to the sink. Replies with the request's id.
    caf::replies_to<atom::generate, generate_request, sink_actor>::with<request_id>,
    // Cancel a request wherever it is; its sink hears `cancelled`.
    caf::reacts_to<atom::cancel, request_id>,
    // How many requests wait, run, ...
    caf::replies_to<atom::status>::with<pipeline_status>,
    // The metrics in Prometheus' text format.
    caf::replies_to<atom::prometheus>::with<std::string>,
    // The metrics as a JSON object.
    caf::replies_to<atom::snapshot>::with<std::string>,
    // Stop taking requests; end the waiting ones with the given message.
    caf::reacts_to<atom::drain, std::string>>;

/// The BATCHER actor interface: the pipeline's interface plus what executors send it.
using batcher_actor = pipeline_actor::extend<
    // An executor asks for work (and says what it has room for).
    caf::reacts_to<atom::pull, executor_actor, executor_report>,
    // An executor ended a request (its sink has heard the result already).
    caf::reacts_to<atom::done, request_id, outcome>,
    // An executor is about to send a request's first chunk: from now on the request cannot run
    // again elsewhere unseen (one message per request, not per token).
    caf::reacts_to<atom::started, request_id>,
    // Time to look at deadlines and partial batches again (argument: timer generation).
    caf::reacts_to<atom::wakeup, uint64_t>>;

struct batcher_ref {
  batcher_actor handle;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, batcher_ref& x) {
  return f(caf::meta::type_name("batcher_ref"), x.handle);
}

/// The REMOTE CONNECTOR actor interface: the server's side of one `conveyor worker`; it connects,
/// attaches the worker to the batcher, and starts over when the worker is lost.
using connector_actor = caf::typed_actor<
    // Try to connect now (sent to itself at start and after each back-off).
    caf::reacts_to<atom::connect>>;

/// The WORKER actor interface: what `conveyor worker` publishes for a server to connect to.
using worker_actor = caf::typed_actor<
    // Let every executor of this worker pull from the given batcher (replaces any earlier one).
    // Replies with the number of executors.
    caf::replies_to<atom::attach, batcher_actor>::with<int32_t>>;

}  // namespace conveyor

// -- metrics ------------------------------------------------------------------------------------

namespace conveyor {

/// Timing events of several requests and steps, sent together (local only: holds time points).
struct timing_batch {
  std::vector<pipeline::request_timing> requests;
  std::vector<pipeline::step_timing> steps;
  std::vector<pipeline::executor_started> started;
  bool empty() const { return requests.empty() && steps.empty() && started.empty(); }
};

}  // namespace conveyor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::timing_batch)

namespace conveyor {

/// The METRICS actor interface.
using metrics_actor = caf::typed_actor<
    // Record timing events.
    caf::reacts_to<timing_batch>,
    // Requests waiting in the batcher's queue.
    caf::reacts_to<atom::queue_depth, uint64_t>,
    // Sequences running on an executor (by name).
    caf::reacts_to<atom::running, std::string, uint64_t>,
    // The Prometheus text.
    caf::replies_to<atom::prometheus>::with<std::string>,
    // The JSON snapshot.
    caf::replies_to<atom::snapshot>::with<std::string>,
    // Log the one-line summary (periodic, sent to itself).
    caf::reacts_to<atom::summary>>;

}  // namespace conveyor
