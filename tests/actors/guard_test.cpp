// A remote executor whose connection dies between a request's result and its `done`: the sink
// still hears exactly one end (the batcher's local guard drops the second).
#include <gtest/gtest.h>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "tests/support/model_files.hpp"
#include "actors/batcher_actor.hpp"
#include "actors/caf_error.hpp"
#include "actors/metrics_actor.hpp"
#include "actors/tokenizer_actor.hpp"
#include "tokenizers/tokenizer.hpp"
#include "pipeline/message_types.hpp"

using namespace conveyor;
using namespace std::chrono_literals;

namespace {

/// A remote executor that finishes the first request it gets (a chunk, then the result) and
/// dies before it can tell the batcher `done`, as a process killed at that moment would.
executor_actor::behavior_type dying_executor(executor_actor::pointer self) {
  return {
      [=](atom::work, std::vector<work_item>& items, bool) {
        auto& item = items.front();
        const auto id = item.request.id;
        self->send(caf::actor_cast<batcher_actor>(self->current_sender()), atom::started::value,
                   id);
        self->send(item.sink, token_chunk{id, "Once", {403}});
        request_result r;
        r.id = id;
        r.how = outcome::finished;
        r.reason = finish_reason::length;
        r.prompt_tokens = 5;
        r.completion_tokens = 1;
        self->send(item.sink, std::move(r));
        self->quit(caf::exit_reason::kill);
      },
      [=](atom::cancel, request_id) {},
      [=](atom::step) {},
      [=](atom::drain, std::string&) {},
      [=](atom::attach, batcher_ref& batcher) {
        self->send(batcher.handle, atom::pull::value, executor_actor{self},
                   executor_report{1, 0, 0, std::string{"remote"}});
      },
  };
}

caf::actor_system_config& networked(caf::actor_system_config& cfg) {
  add_error_category(cfg);
  add_message_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("logger.verbosity", caf::atom("quiet"));
  return cfg;
}

}  // namespace

TEST(sink_guard, a_result_whose_done_never_arrives_ends_the_request_once) {
  caf::actor_system_config worker_cfg;
  caf::actor_system worker_sys{networked(worker_cfg)};
  caf::actor_system_config server_cfg;
  caf::actor_system server_sys{networked(server_cfg)};
  // The executor lives in the "worker" system and is reached over 127.0.0.1.
  auto dying = worker_sys.spawn(dying_executor);
  auto port = worker_sys.middleman().publish(dying, 0, "127.0.0.1", true);
  ASSERT_TRUE(port) << worker_sys.render(port.error());
  auto remote = server_sys.middleman().remote_actor<executor_actor>("127.0.0.1", *port);
  ASSERT_TRUE(remote) << server_sys.render(remote.error());
  auto tok = tokenizers::load_tokenizer(test::source_path("models/stories260K/tok512.model"));
  ASSERT_TRUE(tok);
  auto metrics = spawn_metrics(server_sys, 0);
  auto tokenizers = spawn_tokenizer_pool(server_sys, 1, *tok, 512);
  auto batcher = spawn_batcher(server_sys, batcher_settings{}, tokenizers, metrics);
  // Stops the server's actors on every way out of this test, failed assertions included (the
  // actor system's destructor waits for them).
  struct stopper {
    std::vector<caf::actor> actors;
    ~stopper() {
      for (const auto& a : actors) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    }
  } stop{{caf::actor_cast<caf::actor>(batcher), caf::actor_cast<caf::actor>(tokenizers), caf::actor_cast<caf::actor>(metrics)}};
  size_t chunks = 0;
  std::vector<request_result> ends;
  {
    caf::scoped_actor self{server_sys};
    caf::anon_send(*remote, atom::attach::value, batcher_ref{batcher});
    generate_request req;
    req.id = 7;
    req.prompt = "Once upon a time";
    req.params.max_tokens = 4;
    caf::anon_send(batcher, atom::generate::value, req, caf::actor_cast<sink_actor>(self));
    // The result, then (after the batcher saw the executor go down) nothing more.
    bool quiet = false;
    while (!quiet)
      self->receive([&](token_chunk&) { ++chunks; }, [&](request_result& r) { ends.push_back(r); },
                    caf::after(ends.empty() ? 30s : 1500ms) >> [&] { quiet = true; });
  }
  EXPECT_EQ(chunks, 1u);
  ASSERT_EQ(ends.size(), 1u) << "the sink heard " << ends.size() << " ends";
  EXPECT_EQ(ends[0].how, outcome::finished);
  EXPECT_EQ(ends[0].completion_tokens, 1);
}
