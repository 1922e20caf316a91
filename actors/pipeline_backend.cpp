// The HTTP server's backend on the pipeline: a bridge sink per request, which runs a request
// again when its executor was lost before the client heard anything of it.
#include "actors/pipeline_backend.hpp"

#include <atomic>
#include <optional>
#include <random>

#include <spdlog/spdlog.h>

#include <caf/all.hpp>

#include "tokenizers/detokenizer.hpp"
#include "tokenizers/tokenizer.hpp"
#include "pipeline/rerun_tracker.hpp"

namespace conveyor {

namespace {

/// The server's view of the log-probabilities of some tokens.
std::vector<server::token_logprob> to_server(std::vector<token_logprob>& entries) {
  std::vector<server::token_logprob> out;
  out.reserve(entries.size());
  for (auto& e : entries) {
    server::token_logprob t{std::move(e.chosen.text), e.chosen.logprob, {}};
    t.top.reserve(e.top.size());
    for (auto& alt : e.top) t.top.push_back({std::move(alt.text), alt.logprob});
    out.push_back(std::move(t));
  }
  return out;
}

/// How many times the server runs a request again whose executor was lost before the client
/// heard anything of it (see pipeline/rerun_tracker.hpp).
constexpr int32_t max_reruns = 2;

/// One step's chunk as the server's step event.
server::completion_step to_step(token_chunk& chunk) {
  server::completion_step step;
  step.prompt_logprobs = to_server(chunk.prompt_logprobs);
  step.logprobs = to_server(chunk.logprobs);
  step.text = std::move(chunk.text);
  return step;
}

/// A request's end as the server's step event.
server::completion_step to_step(request_result& r) {
  server::completion_step step;
  step.text = std::move(r.tail);
  if (r.how == outcome::finished) {
    step.end = server::completion_step::end_kind::finished;
    step.finish_reason = to_string(r.reason);
    step.usage = {r.prompt_tokens, r.completion_tokens, r.cached_tokens};
  } else {
    step.end = server::completion_step::end_kind::failed;
    step.code = r.code;
    step.message = r.message;
  }
  return step;
}

/// The bridge sink's state: its request's runs, the server's events, where to send a run.
struct bridge_state {
  static inline const char* name = "conveyor.bridge_sink";
  std::optional<pipeline::rerun_tracker> runs;
  server::completion_events events;
  pipeline_actor front;
  std::shared_ptr<std::atomic<request_id>> next_id;
};

/// A sink that forwards one request's output to the server, then quits. Each message (one
/// step's chunk, or the result) goes to the server as one `on_step`, so that its events are
/// posted and written together. A request lost before its first chunk runs again
/// (`rerun_tracker`); cancels come through here so that they reach the run in progress.
request_sink_actor::behavior_type bridge_sink(
    request_sink_actor::stateful_pointer<bridge_state> self, generate_request request,
    server::completion_events events, pipeline_actor front,
    std::shared_ptr<std::atomic<request_id>> next_id) {
  auto& st = self->state;
  st.runs.emplace(std::move(request), max_reruns);
  st.events = std::move(events);
  st.front = std::move(front);
  st.next_id = std::move(next_id);
  return {
      [=](token_chunk& chunk) {
        auto& st = self->state;
        if (st.runs->on_chunk(chunk) != pipeline::rerun_verdict::deliver) return;
        auto step = to_step(chunk);
        if (!step.text.empty() || !step.logprobs.empty() || !step.prompt_logprobs.empty())
          st.events.on_step(std::move(step));
      },
      [=](request_result& r) {
        auto& st = self->state;
        switch (st.runs->on_result(r)) {
          case pipeline::rerun_verdict::ignore:
            return;
          case pipeline::rerun_verdict::rerun: {
            const auto id = (*st.next_id)++;
            spdlog::warn("request {}: {}; nothing of it was sent, so it runs again as request {}",
                         r.id, r.message, id);
            // anon_send: the pipeline's reply (the id) is not wanted. Sent from this actor's
            // handler, it reaches the pipeline before any cancel this actor forwards later.
            caf::anon_send(st.front, atom::generate::value, st.runs->rerun(id),
                           caf::actor_cast<sink_actor>(self));
            return;
          }
          case pipeline::rerun_verdict::deliver:
            break;
        }
        st.events.on_step(to_step(r));
        self->quit();
      },
      [=](atom::cancel) {
        auto& st = self->state;
        st.runs->cancelled();
        caf::anon_send(st.front, atom::cancel::value, st.runs->current());
      },
  };
}

class pipeline_request final : public server::request_handle {
 public:
  explicit pipeline_request(request_sink_actor sink) : sink_(std::move(sink)) {}
  void cancel() override { caf::anon_send(sink_, atom::cancel::value); }

 private:
  request_sink_actor sink_;
};

}  // namespace

pipeline_backend::pipeline_backend(caf::actor_system& system, pipeline_handle pipeline,
                                   server::completion_defaults defaults)
    : system_(system), pipeline_(std::move(pipeline)), defaults_(defaults) {}

std::shared_ptr<server::request_handle> pipeline_backend::submit(server::completion_request req,
                                                                 server::completion_events events) {
  generate_request g;
  g.id = (*next_id_)++;
  g.arrival = now_stamp();
  g.prompt = std::move(req.prompt);
  g.prompt_tokens = std::move(req.prompt_tokens);
  g.add_bos = req.add_bos;
  g.params = std::move(req.params);
  // A seed drawn here, not by the executor: a request run again (its executor lost before its
  // first chunk) samples the same.
  thread_local std::mt19937_64 seeds{std::random_device{}()};
  if (!g.params.seed) g.params.seed = seeds();
  g.priority = req.priority;
  g.timeout_s = req.timeout_s ? *req.timeout_s : 0.0;
  // The sink keeps the request to run it again if its executor is lost before its first chunk.
  auto sink = system_.spawn(bridge_sink, g, std::move(events), pipeline_.front, next_id_);
  caf::anon_send(pipeline_.front, atom::generate::value, std::move(g), sink_actor{sink});
  return std::make_shared<pipeline_request>(std::move(sink));
}

expected<std::vector<int32_t>> pipeline_backend::tokenize(const std::string& text,
                                                          bool add_bos) const {
  return pipeline_.tokenizer->encode(text, add_bos);
}

std::string pipeline_backend::detokenize(const std::vector<int32_t>& ids) const {
  return tokenizers::decode_prompt(*pipeline_.tokenizer, ids);
}

void pipeline_backend::collect_metrics(std::function<void(std::string)> reply) {
  auto front = pipeline_.front;
  system_.spawn([front, reply](caf::event_based_actor* self) {
    self->request(front, std::chrono::seconds(5), atom::prometheus::value)
        .then([=](std::string& text) { reply(std::move(text)); },
              [=](caf::error&) { reply("# metrics unavailable\n"); });
  });
}

}  // namespace conveyor
