// conveyor serve: the pipeline behind an OpenAI-style HTTP server, until SIGINT or SIGTERM.
#include <pthread.h>
#include <csignal>
#include <cstdio>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include "actors/pipeline_backend.hpp"
#include "actors/spawn.hpp"
#include "apps/conveyor/commands.hpp"
#include "apps/conveyor/config_flags.hpp"
#include "chat/template_source.hpp"
#include "tokenizers/tokenizer.hpp"
#include "tokenizers/tokenizer_config.hpp"
#include "pipeline/message_types.hpp"
#include "server/http_server.hpp"

namespace conveyor::app {

namespace {

int run_serve(const config_flags& flags) {
  auto cfg = flags.load();
  if (!cfg) {
    std::fprintf(stderr, "conveyor serve: %s\n", message_of(cfg.error()).c_str());
    return 1;
  }
  setup_logging(cfg->log.level);
  // Signals go to sigwait below, never to a worker thread.
  sigset_t signals = block_stop_signals();
  // The chat template fails at start, before any model loads: model.chat_template, else the
  // model's own beside the tokenizer (chat_template.jinja, tokenizer_config.json's field), with
  // the BOS and EOS of tokenizer_config.json (else SentencePiece's "<s>" and "</s>"). A model
  // with neither gets chat refused with a 400 that says so.
  const auto tokenizer_path = tokenizer_file(*cfg);
  auto tokenizer_settings = tokenizers::tokenizer_config_beside(tokenizer_path);
  auto model_templates = tokenizers::chat_templates_beside(tokenizer_path);
  if (!tokenizer_settings || !model_templates) {
    const auto& err = !tokenizer_settings ? tokenizer_settings.error() : model_templates.error();
    std::fprintf(stderr, "conveyor serve: %s\n", message_of(err).c_str());
    return 1;
  }
  chat::special_tokens tokens{"<s>", "</s>"};
  if (const auto& t = *tokenizer_settings) {
    if (!t->bos_token.empty()) tokens.bos_token = t->bos_token;
    if (!t->eos_token.empty()) tokens.eos_token = t->eos_token;
  }
  auto chat = chat::select_chat_template(cfg->model.chat_template, model_templates->templates,
                                         model_templates->origin, tokens);
  if (!chat) {
    std::fprintf(stderr, "conveyor serve: %s\n", message_of(chat.error()).c_str());
    return 1;
  }
  if (chat->tmpl)
    spdlog::info("chat template: {}", chat->origin);
  else
    spdlog::warn("chat completions are refused: {}", chat->refusal);
  if (chat->tool_tmpl)
    spdlog::info("chat template of conversations with tools: {} (tool_use)",
                 model_templates->origin);
  caf::actor_system_config sys_cfg;
  // Workers (cluster.remote) talk to the batcher and the sinks through CAF's middleman.
  configure_actor_system(sys_cfg);
  caf::actor_system system{sys_cfg};
  auto pipeline = spawn_pipeline(system, *cfg);
  if (!pipeline) {
    std::fprintf(stderr, "conveyor serve: %s\n", message_of(pipeline.error()).c_str());
    return 1;
  }
  server::completion_defaults defaults;
  defaults.max_tokens = int32_t(cfg->generation.max_tokens);
  defaults.temperature = float(cfg->generation.temperature);
  defaults.top_p = float(cfg->generation.top_p);
  defaults.top_k = int32_t(cfg->generation.top_k);
  defaults.vocab_size = pipeline->tokenizer->vocab_size();
  pipeline_backend backend{system, *pipeline, defaults};
  server::server_options so;
  so.host = cfg->server.host;
  so.port = uint16_t(cfg->server.port);
  so.io_threads = int32_t(cfg->server.io_threads);
  so.max_body_bytes = size_t(cfg->server.max_body_bytes);
  so.max_header_bytes = size_t(cfg->server.max_header_bytes);
  so.idle_timeout = std::chrono::seconds(cfg->server.idle_timeout_s);
  so.header_timeout = std::chrono::seconds(cfg->server.header_timeout_s);
  so.max_connections = size_t(cfg->server.max_connections);
  so.max_connections_per_address = size_t(cfg->server.max_connections_per_address);
  so.drain_timeout = std::chrono::seconds(cfg->server.drain_timeout_s);
  so.max_stream_buffer_bytes = size_t(cfg->server.max_stream_buffer_bytes);
  so.stream_interval = size_t(cfg->server.stream_interval);
  so.stream_delay = std::chrono::milliseconds(cfg->server.stream_delay_ms);
  so.max_prompts = size_t(cfg->server.max_prompts);
  so.max_n = size_t(cfg->server.max_n);
  so.chat_template = chat->tmpl;
  if (!chat->tmpl) so.chat_refusal = chat->refusal;
  so.tool_chat_template = chat->tool_tmpl;
  so.tool_call_parser = cfg->model.tool_call_parser;
  server::http_server http{so, backend};
  if (auto err = http.start()) {
    std::fprintf(stderr, "conveyor serve: cannot listen on %s:%d: %s\n", so.host.c_str(),
                 int(cfg->server.port), err.message().c_str());
    stop_pipeline(*pipeline);
    return 1;
  }
  http.set_ready(true);
  spdlog::info("ready: model {} at http://{}:{}/v1/completions", pipeline->model_name, so.host,
               http.port());
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received {}: draining (up to {} s)", sig == SIGINT ? "SIGINT" : "SIGTERM",
               cfg->server.drain_timeout_s);
  http.begin_drain();
  http.wait();
  anon_send(pipeline->front, atom::drain::value, std::string{"the server is shutting down"});
  stop_pipeline(*pipeline);
  spdlog::info("stopped");
  return 0;
}

}  // namespace

command_fn add_serve(CLI::App& app) {
  auto flags = std::make_shared<config_flags>();
  auto* cmd = app.add_subcommand("serve",
                                 "Serve the model over OpenAI-style HTTP "
                                 "(/v1/completions, /v1/chat/completions, /v1/models, /health, "
                                 "/metrics, /tokenize, /detokenize)");
  flags->add_to(*cmd, true);
  flags->add_threads_to(*cmd);
  return [flags] { return run_serve(*flags); };
}

}  // namespace conveyor::app
