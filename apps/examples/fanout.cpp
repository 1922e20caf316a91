// Embedding Conveyor in a larger CAF actor system: a client actor fans out prompts to the
// pipeline, each with its own sink actor, and gathers the answers in order.
//
//   conveyor_fanout_example [PROMPT ...]
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/caf_error.hpp"
#include "actors/spawn.hpp"

using namespace conveyor;

namespace {

/// A sink that collects one request's text and reports it to the client when the request ends.
sink_actor::behavior_type collector(sink_actor::stateful_pointer<std::string> self,
                                    caf::actor client, size_t index) {
  return {
      [=](token_chunk& chunk) { self->state += chunk.text; },
      [=](request_result& result) {
        self->state += result.tail;
        const std::string status =
            result.how == outcome::finished ? to_string(result.reason) : result.message;
        caf::anon_send(client, index, self->state, status);
        self->quit();
      },
  };
}

struct client_state {
  std::map<size_t, std::pair<std::string, std::string>> answers;
  size_t expected = 0;
};

/// The client: sends every prompt, waits for every answer, prints them and quits.
caf::behavior client(caf::stateful_actor<client_state>* self, pipeline_actor pipeline,
                     std::vector<std::string> prompts) {
  self->state.expected = prompts.size();
  for (size_t i = 0; i < prompts.size(); ++i) {
    generate_request req;
    req.prompt = prompts[i];
    req.params.max_tokens = 40;
    req.params.temperature = 0;
    auto sink = self->spawn(collector, caf::actor{self}, i);
    self->send(pipeline, atom::generate::value, std::move(req), sink);
  }
  return {
      [=](request_id) {},  // the pipeline's acknowledgement of each request
      [=](size_t index, std::string& text, std::string& status) {
        auto& st = self->state;
        st.answers[index] = {std::move(text), std::move(status)};
        if (st.answers.size() < st.expected) return;
        for (auto& [i, answer] : st.answers)
          std::printf("[%zu] %s (%s)\n", i, answer.first.c_str(), answer.second.c_str());
        self->quit();
      },
  };
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> prompts(argv + 1, argv + argc);
  if (prompts.empty()) prompts = {"Once upon a time", "The cat sat", "Tom had a red ball."};
  caf::actor_system_config cfg;
  add_error_category(cfg);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system system{cfg};
  config::pipeline settings;  // every default: the embedded stories260K, continuous batching
  settings.metrics.interval_s = 0;
  auto pipeline = spawn_pipeline(system, settings);
  if (!pipeline) {
    std::fprintf(stderr, "cannot start the pipeline: %s\n", message_of(pipeline.error()).c_str());
    return 1;
  }
  {
    caf::scoped_actor self{system};
    auto c = system.spawn(client, pipeline->front, prompts);
    self->wait_for(c);
  }
  stop_pipeline(*pipeline);
  return 0;
}
