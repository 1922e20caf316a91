// A fake executor for tests of what the batcher and the sinks do when an executor is lost: it
// pulls, takes work and runs none of it, and tells an observer which ids it holds.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "pipeline/actors.hpp"

namespace conveyor::test {

/// Ids an executor received, reported to the test.
struct received_ids {
  std::vector<request_id> ids;
};

}  // namespace conveyor::test

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::test::received_ids)

namespace conveyor::test {

/// What the fake does with a request it takes.
enum class fake_output {
  /// Tells the batcher the first request it gets streams, and sends that request's sink one
  /// chunk ("X").
  first_streams,
  /// Tells the batcher every request streams and sends no chunk: an executor lost between the
  /// two messages.
  started_only,
  /// Tells the batcher every request streams and ends it at once: finished at its length with
  /// one token ("X"), every prompt token but the last looked up in the prefix cache and all
  /// but the last two found there.
  finishes_cached,
};

/// The fake: four slots, named "fake"; `observer` hears a `received_ids` per work message.
inline executor_actor::behavior_type fake_executor(executor_actor::pointer self,
                                                   batcher_actor batcher, caf::actor observer,
                                                   fake_output output) {
  self->send(batcher, atom::pull::value, executor_actor{self},
             executor_report{4, 0, 0, std::string{"fake"}});
  auto streamed = std::make_shared<bool>(false);
  return {
      [=](atom::work, std::vector<work_item>& items, bool) {
        received_ids r;
        for (auto& item : items) {
          r.ids.push_back(item.request.id);
          if (output == fake_output::started_only) {
            self->send(batcher, atom::started::value, item.request.id);
          } else if (output == fake_output::finishes_cached) {
            self->send(batcher, atom::started::value, item.request.id);
            self->send(item.sink, token_chunk{item.request.id, "X", {1}});
            request_result result;
            result.id = item.request.id;
            result.reason = finish_reason::length;
            result.prompt_tokens = int32_t(item.request.prompt.size());
            result.completion_tokens = 1;
            result.cache_queried_tokens = result.prompt_tokens - 1;
            result.cached_tokens = result.prompt_tokens - 2;
            self->send(item.sink, std::move(result));
          } else if (!*streamed) {
            *streamed = true;
            self->send(batcher, atom::started::value, item.request.id);
            self->send(item.sink, token_chunk{item.request.id, "X", {1}});
          }
        }
        caf::anon_send(observer, std::move(r));
      },
      [=](atom::cancel, request_id) {},
      [=](atom::step) {},
      [=](atom::drain, std::string&) {},
      [=](atom::attach, batcher_ref&) {},
  };
}

}  // namespace conveyor::test
