// The HTTP server's backend on a real pipeline: a request whose executor was lost after it said
// the request streams but before the sink heard a chunk runs again, and the server hears only
// its answer (run.c's); one that streamed a chunk fails with executor_lost; a cancel reaches the
// run in progress; a prompt the tokenizer cannot finish fails with the tokenizer's error.
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <caf/all.hpp>

#include "tests/support/temp_dir.hpp"
#include "tests/support/model_files.hpp"
#include "actors/batcher_actor.hpp"
#include "actors/caf_error.hpp"
#include "actors/metrics_actor.hpp"
#include "actors/pipeline_backend.hpp"
#include "actors/spawn.hpp"
#include "actors/tokenizer_actor.hpp"
#include "fake_executor.hpp"
#include "tokenizers/tokenizer.hpp"

using namespace conveyor;
using namespace std::chrono_literals;

namespace {

/// What the server heard of one request, from the backend's steps (any thread).
class heard {
 public:
  server::completion_events events() {
    server::completion_events e;
    e.on_step = [this](server::completion_step step) {
      std::lock_guard<std::mutex> lock(mutex_);
      text_ += step.text;
      switch (step.end) {
        case server::completion_step::end_kind::none:
          return;
        case server::completion_step::end_kind::finished:
          ends_.push_back("finished " + step.finish_reason);
          usage_ = step.usage;
          break;
        case server::completion_step::end_kind::failed:
          ends_.push_back(std::string{"error "} + to_string(step.code) + ": " + step.message);
          break;
      }
      changed_.notify_all();
    };
    return e;
  }

  /// Waits for the end (60 s at most, a hang); the ends heard so far.
  std::vector<std::string> wait_for_end() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, 60s, [&] { return !ends_.empty(); });
    return ends_;
  }

  std::string text() {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

  int32_t completion_tokens() {
    std::lock_guard<std::mutex> lock(mutex_);
    return usage_.completion_tokens;
  }

  server::completion_usage usage() {
    std::lock_guard<std::mutex> lock(mutex_);
    return usage_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string text_;
  std::vector<std::string> ends_;
  server::completion_usage usage_;
};

class pipeline_backend_test : public ::testing::Test {
 protected:
  static caf::actor_system_config& init(caf::actor_system_config& cfg) {
    add_error_category(cfg);
    cfg.set("logger.verbosity", caf::atom("quiet"));
    return cfg;
  }

  void SetUp() override {
    auto tok = tokenizers::load_tokenizer(test::source_path("models/stories260K/tok512.model"));
    ASSERT_TRUE(tok);
    handle.tokenizer = *tok;
    handle.metrics = spawn_metrics(sys, 0);
    handle.tokenizers = spawn_tokenizer_pool(sys, 1, handle.tokenizer, 512);
    batcher = spawn_batcher(sys, batcher_settings{}, handle.tokenizers, handle.metrics);
    handle.front = batcher;
    handle.model_name = "stories260K";
    handle.context = 512;
    backend = std::make_unique<pipeline_backend>(sys, handle, server::completion_defaults{});
  }

  void TearDown() override {
    for (const auto& e : real) caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
    for (const caf::actor& a : {caf::actor_cast<caf::actor>(batcher),
                                caf::actor_cast<caf::actor>(handle.tokenizers),
                                caf::actor_cast<caf::actor>(handle.metrics)})
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  // The greedy request of run.c's expected run (models/stories260K/expected).
  server::completion_request greedy() {
    server::completion_request r;
    r.prompt = "Once upon a time";
    r.params.max_tokens = int32_t(test::load_expected_run().generated().size());
    r.params.temperature = 0;
    return r;
  }

  // Waits until the fake executor holds `count` requests.
  void wait_until_held(caf::scoped_actor& self, size_t count) {
    std::set<request_id> held;
    while (held.size() < count) {
      bool timed_out = false;
      self->receive([&](test::received_ids& r) { held.insert(r.ids.begin(), r.ids.end()); },
                    caf::after(30s) >> [&] { timed_out = true; });
      ASSERT_FALSE(timed_out) << "the fake executor got " << held.size() << " requests";
    }
  }

  // A real executor on the embedded model pulls from the batcher from now on.
  void attach_real_executor() {
    config::pipeline cfg;
    cfg.auto_executors = false;
    config::executor e;
    e.threads = 1;
    e.slots = 4;
    cfg.executors.push_back(e);
    cfg.metrics.interval_s = 0;
    auto group = spawn_executors(sys, cfg, handle.metrics, "");
    ASSERT_TRUE(group) << message_of(group.error());
    real = group->executors;
    caf::anon_send(real[0], atom::attach::value, batcher_ref{batcher});
  }

  // Live requests in the pipeline, by stage.
  pipeline_status status(caf::scoped_actor& self) {
    pipeline_status s;
    self->request(batcher, 30s, atom::status::value)
        .receive([&](const pipeline_status& got) { s = got; },
                 [&](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
    return s;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys{init(cfg)};
  pipeline_handle handle;
  batcher_actor batcher;
  std::unique_ptr<pipeline_backend> backend;
  std::vector<executor_actor> real;
};

}  // namespace

TEST_F(pipeline_backend_test, a_request_lost_before_its_first_chunk_runs_again_unseen) {
  heard lost_unheard;
  heard lost_after_a_chunk;
  {
    caf::scoped_actor self{sys};
    // The fake says both requests stream, sends a chunk of the first only, and is killed.
    auto fake = sys.spawn(test::fake_executor, batcher, caf::actor{self},
                          test::fake_output::first_streams);
    auto first = backend->submit(greedy(), lost_after_a_chunk.events());
    wait_until_held(self, 1);
    caf::anon_send_exit(fake, caf::exit_reason::kill);
    auto second_fake = sys.spawn(test::fake_executor, batcher, caf::actor{self},
                                 test::fake_output::started_only);
    auto second = backend->submit(greedy(), lost_unheard.events());
    wait_until_held(self, 1);
    caf::anon_send_exit(second_fake, caf::exit_reason::kill);
    attach_real_executor();
  }
  const auto expected = test::load_expected_run();
  // The batcher failed the second request (it "streamed"); its sink had heard nothing, ran it
  // again on the real executor, and the server heard run.c's answer and nothing else.
  EXPECT_EQ(lost_unheard.wait_for_end(), std::vector<std::string>{"finished length"});
  EXPECT_EQ("Once upon a time" + lost_unheard.text() + "\n", expected.text);
  EXPECT_EQ(size_t(lost_unheard.completion_tokens()), expected.generated().size());
  // The first request's sink had passed a chunk on: it cannot run again unseen.
  const auto ends = lost_after_a_chunk.wait_for_end();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].rfind("error executor_lost: ", 0), 0u) << ends[0];
  EXPECT_EQ(lost_after_a_chunk.text(), "X");
}

TEST_F(pipeline_backend_test, the_usage_has_the_prompt_tokens_read_from_the_prefix_cache) {
  // "Once upon a time" is 5 tokens with BOS: the fake executor found 3 of them in its cache.
  heard finished;
  caf::scoped_actor self{sys};
  auto fake =
      sys.spawn(test::fake_executor, batcher, caf::actor{self}, test::fake_output::finishes_cached);
  auto request = backend->submit(greedy(), finished.events());
  EXPECT_EQ(finished.wait_for_end(), std::vector<std::string>{"finished length"});
  EXPECT_EQ(finished.text(), "X");
  const auto usage = finished.usage();
  EXPECT_EQ(usage.prompt_tokens, 5);
  EXPECT_EQ(usage.completion_tokens, 1);
  EXPECT_EQ(usage.cached_tokens, 3);
  caf::anon_send_exit(fake, caf::exit_reason::kill);
}

TEST_F(pipeline_backend_test, a_cancel_reaches_the_run_in_progress) {
  heard cancelled;
  {
    caf::scoped_actor self{sys};
    auto fake = sys.spawn(test::fake_executor, batcher, caf::actor{self},
                          test::fake_output::started_only);
    auto request = backend->submit(greedy(), cancelled.events());
    wait_until_held(self, 1);
    caf::anon_send_exit(fake, caf::exit_reason::kill);
    // The lost run ends and the rerun waits in the queue: no executor is left to take it.
    pipeline_status s = status(self);
    for (int i = 0; i < 6000 && !(s.waiting == 1 && s.running == 0); ++i) {
      std::this_thread::sleep_for(10ms);
      s = status(self);
    }
    ASSERT_EQ(s.waiting, 1u);
    ASSERT_EQ(s.running, 0u);
    // The server cancels with the handle it got at submit: the rerun (a new id) ends.
    request->cancel();
    EXPECT_EQ(cancelled.wait_for_end(),
              std::vector<std::string>{"error cancelled: request cancelled"});
    EXPECT_EQ(status(self).waiting, 0u);
  }
  EXPECT_EQ(cancelled.text(), "");
}

TEST_F(pipeline_backend_test, a_prompt_the_tokenizer_cannot_finish_fails_with_its_error) {
  // A tokenizer.json whose Split regex tries every way to split forty a's before it gives up.
  test::temp_dir folder{"conveyor_unfinishable"};
  const auto path = folder.file("tokenizer.json");
  std::ofstream{path} << R"({"model": {"type": "BPE", "vocab": {"a": 0, "!": 1}, "merges": []},
    "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a+)+\\d"}, "behavior": "Isolated"},
    "decoder": {"type": "Fuse"}})";
  auto tok = tokenizers::load_tokenizer(path);
  ASSERT_TRUE(tok) << message_of(tok.error());
  pipeline_handle unfinishable = handle;
  unfinishable.tokenizer = *tok;
  unfinishable.tokenizers = spawn_tokenizer_pool(sys, 1, *tok, 512);
  auto front = spawn_batcher(sys, batcher_settings{}, unfinishable.tokenizers, handle.metrics);
  unfinishable.front = front;
  pipeline_backend backend_of_it{sys, unfinishable, server::completion_defaults{}};
  const std::string message_start = path + ": pre_tokenizer Split: regex '(a+)+\\d' cannot finish";
  // A completion: refused before it runs, with the tokenizer's message (HTTP 400).
  heard refused;
  server::completion_request r;
  r.prompt = std::string(40, 'a') + "!";
  r.params.max_tokens = 4;
  auto request = backend_of_it.submit(r, refused.events());
  const auto ends = refused.wait_for_end();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].rfind("error bad_request: " + message_start, 0), 0u) << ends[0];
  EXPECT_EQ(refused.text(), "");
  // POST /tokenize: the same error.
  auto ids = backend_of_it.tokenize(r.prompt, true);
  ASSERT_FALSE(ids);
  EXPECT_EQ(code_of(ids.error()), ec::bad_request);
  EXPECT_EQ(message_of(ids.error()).rfind(message_start, 0), 0u) << message_of(ids.error());
  for (const caf::actor& a :
       {caf::actor_cast<caf::actor>(front), caf::actor_cast<caf::actor>(unfinishable.tokenizers)})
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}
