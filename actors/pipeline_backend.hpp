// The HTTP server's backend on the actor pipeline: each request gets a sink actor that turns
// the pipeline's messages into the server's step events.
#pragma once

#include <atomic>
#include <memory>

#include <caf/fwd.hpp>

#include "actors/spawn.hpp"
#include "server/backend.hpp"

namespace conveyor {

/// Implements the server's completion_backend by sending `generate` to a pipeline.
class pipeline_backend final : public server::completion_backend {
 public:
  pipeline_backend(caf::actor_system& system, pipeline_handle pipeline,
                   server::completion_defaults defaults);

  std::shared_ptr<server::request_handle> submit(server::completion_request req,
                                                 server::completion_events events) override;
  std::string model_name() const override { return pipeline_.model_name; }
  void collect_metrics(std::function<void(std::string text)> reply) override;
  server::completion_defaults defaults() const override { return defaults_; }
  bool has_tokenizer() const override { return pipeline_.tokenizer != nullptr; }
  expected<std::vector<int32_t>> tokenize(const std::string& text, bool add_bos) const override;
  std::string detokenize(const std::vector<int32_t>& ids) const override;
  int32_t max_model_len() const override { return pipeline_.context; }

 private:
  caf::actor_system& system_;
  pipeline_handle pipeline_;
  server::completion_defaults defaults_;
  // Request ids, shared with the sinks (a run again takes a new one).
  std::shared_ptr<std::atomic<request_id>> next_id_ =
      std::make_shared<std::atomic<request_id>>(1);
};

}  // namespace conveyor
