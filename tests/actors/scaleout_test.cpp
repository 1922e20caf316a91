// Losing an executor: the batcher runs its not-yet-streamed requests again elsewhere and fails
// the streamed ones with executor_lost, each exactly once; with real executors killed mid-run
// every request still ends exactly once; an executor stopped while idle logs no error.
#include <atomic>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <caf/all.hpp>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "tests/support/model_files.hpp"
#include "actors/batcher_actor.hpp"
#include "actors/caf_error.hpp"
#include "actors/executor_actor.hpp"
#include "actors/metrics_actor.hpp"
#include "actors/remote_connector.hpp"
#include "actors/spawn.hpp"
#include "actors/tokenizer_actor.hpp"
#include "fake_executor.hpp"
#include "model/causal_lm.hpp"
#include "tokenizers/tokenizer.hpp"

using namespace conveyor;
using namespace std::chrono_literals;

namespace {

using test::fake_executor;
using test::received_ids;

constexpr auto streams = test::fake_output::first_streams;

struct ending {
  std::vector<request_result> results;
  std::string text;
  size_t chunks = 0;
};

class scaleout_test : public ::testing::Test {
 protected:
  static caf::actor_system_config& init(caf::actor_system_config& cfg) {
    add_error_category(cfg);
    cfg.set("logger.verbosity", caf::atom("quiet"));
    return cfg;
  }

  config::pipeline make_config(size_t executors) {
    config::pipeline cfg;
    cfg.auto_executors = false;
    for (size_t i = 0; i < executors; ++i) {
      config::executor e;
      e.threads = 1;
      e.slots = 4;
      cfg.executors.push_back(e);
    }
    cfg.metrics.interval_s = 0;
    return cfg;
  }

  generate_request make_request(request_id id, int32_t max_tokens) {
    static const std::vector<std::string> prompts = {"Once upon a time", "The cat sat",
                                                     "Lily went to the park", "One day"};
    generate_request r;
    r.id = id;
    r.prompt = prompts[(id % 10) % prompts.size()];  // ids 1 and 11 ask the same
    r.params.max_tokens = max_tokens;
    r.params.temperature = 0;
    return r;
  }

  // Receives chunks and results until `count` results arrived.
  void collect(caf::scoped_actor& self, std::map<request_id, ending>& out, size_t count) {
    size_t results = 0;
    for (auto& [id, e] : out) results += e.results.size();
    bool timed_out = false;
    while (results < count && !timed_out) {
      self->receive(
          [&](token_chunk& c) {
            out[c.id].text += c.text;
            ++out[c.id].chunks;
          },
          [&](request_result& r) {
            out[r.id].text += r.tail;
            out[r.id].results.push_back(r);
            ++results;
          },
          caf::after(60s) >> [&] { timed_out = true; });
    }
    EXPECT_FALSE(timed_out) << results << " of " << count << " requests ended";
  }

  caf::actor_system_config cfg;
  caf::actor_system sys{init(cfg)};
};

TEST_F(scaleout_test, a_lost_executor_s_unstreamed_requests_run_again_and_streamed_ones_fail) {
  auto tok = tokenizers::load_tokenizer(test::source_path("models/stories260K/tok512.model"));
  ASSERT_TRUE(tok);
  auto metrics = spawn_metrics(sys, 0);
  auto tokenizers = spawn_tokenizer_pool(sys, 1, *tok, 512);
  auto batcher = spawn_batcher(sys, batcher_settings{}, tokenizers, metrics);
  std::map<request_id, ending> out;
  std::vector<executor_actor> real;
  {
    caf::scoped_actor self{sys};
    // Only the fake executor pulls: it takes all four requests and streams the first.
    auto fake = sys.spawn(fake_executor, batcher, caf::actor{self}, streams);
    for (request_id id = 1; id <= 4; ++id)
      caf::anon_send(batcher, atom::generate::value, make_request(id, 24),
                     caf::actor_cast<sink_actor>(self));
    std::set<request_id> held;
    size_t chunks = 0;
    while (held.size() < 4 || chunks < 1) {
      bool timed_out = false;
      self->receive([&](received_ids& r) { held.insert(r.ids.begin(), r.ids.end()); },
                    [&](token_chunk& c) {
                      out[c.id].text += c.text;
                      ++out[c.id].chunks;
                      ++chunks;
                    },
                    caf::after(30s) >> [&] { timed_out = true; });
      ASSERT_FALSE(timed_out) << "the fake executor got " << held.size() << " requests";
    }
    caf::anon_send_exit(fake, caf::exit_reason::kill);
    // A real executor joins; the three requests that streamed nothing run on it from the start.
    auto group = spawn_executors(sys, make_config(1), metrics, "");
    ASSERT_TRUE(group) << message_of(group.error());
    real = group->executors;
    caf::anon_send(real[0], atom::attach::value, batcher_ref{batcher});
    collect(self, out, 4);
    // The same requests again, now straight on the real executor: the reference answers.
    for (request_id id = 11; id <= 14; ++id)
      caf::anon_send(batcher, atom::generate::value, make_request(id, 24),
                     caf::actor_cast<sink_actor>(self));
    collect(self, out, 8);
  }
  std::vector<request_id> streamed;
  for (request_id id = 1; id <= 4; ++id) {
    const auto& e = out[id];
    ASSERT_EQ(e.results.size(), 1u) << "request " << id;
    if (e.results[0].how == outcome::failed) {
      EXPECT_EQ(e.results[0].code, ec::executor_lost);
      EXPECT_EQ(e.chunks, 1u);
      streamed.push_back(id);
    } else {
      EXPECT_EQ(e.results[0].how, outcome::finished) << e.results[0].message;
      EXPECT_EQ(e.text, out[id + 10].text) << "request " << id;
    }
  }
  EXPECT_EQ(streamed.size(), 1u);
  for (const auto& e : real) caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
  for (const caf::actor& a :
       {caf::actor_cast<caf::actor>(batcher), caf::actor_cast<caf::actor>(tokenizers), caf::actor_cast<caf::actor>(metrics)})
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_F(scaleout_test, an_executor_stopped_while_idle_logs_no_error_and_a_killed_one_does) {
  // What the batcher logs when an executor goes: a stopped one that held nothing is an orderly
  // shutdown (info only); a killed one is lost (an error), even when it held nothing.
  auto log = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(100);
  spdlog::default_logger()->sinks().push_back(log);
  auto tok = tokenizers::load_tokenizer(test::source_path("models/stories260K/tok512.model"));
  ASSERT_TRUE(tok);
  auto metrics = spawn_metrics(sys, 0);
  auto tokenizers = spawn_tokenizer_pool(sys, 1, *tok, 512);
  auto batcher = spawn_batcher(sys, batcher_settings{}, tokenizers, metrics);
  // Stopped on every way out, so that a failed assertion does not leave the system waiting.
  std::shared_ptr<void> stop_all(nullptr, [&](void*) {
    spdlog::default_logger()->sinks().pop_back();
    caf::anon_send_exit(batcher, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(tokenizers, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(metrics, caf::exit_reason::user_shutdown);
  });
  auto lines_about = [&](const std::string& name) {
    std::vector<std::string> found;
    for (const auto& line : log->last_formatted())
      if (line.find("executor " + name) != std::string::npos) found.push_back(line);
    return found;
  };
  {
    caf::scoped_actor self{sys};
    // How many executors the batcher knows: it learns of one from its first pull, and forgets
    // it on its down message.
    auto executors = [&] {
      size_t n = 0;
      self->request(batcher, 30s, atom::status::value)
          .receive([&](const pipeline_status& s) { n = s.executors; },
                   [&](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
      return n;
    };
    auto stopped = sys.spawn(fake_executor, batcher, caf::actor{self}, streams);
    auto killed = sys.spawn(fake_executor, batcher, caf::actor{self}, streams);
    for (int i = 0; i < 6000 && executors() < 2; ++i) std::this_thread::sleep_for(10ms);
    ASSERT_EQ(executors(), 2u);
    caf::anon_send_exit(stopped, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(killed, caf::exit_reason::kill);
    // Each end reaches the batcher as a down message; wait until both are handled.
    for (int i = 0; i < 6000 && executors() > 0; ++i) std::this_thread::sleep_for(10ms);
    ASSERT_EQ(executors(), 0u);
  }
  // Both fakes are named "fake": tell them apart by what each line says.
  std::vector<std::string> errors, stops;
  for (const auto& line : lines_about("fake")) {
    EXPECT_EQ(line.find("[warning]"), std::string::npos) << line;
    if (line.find("[error]") != std::string::npos) errors.push_back(line);
    if (line.find("stopped") != std::string::npos) stops.push_back(line);
  }
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_NE(stops[0].find("[info] executor fake stopped"), std::string::npos) << stops[0];
  ASSERT_EQ(errors.size(), 2u);  // "lost: <reason>", then what became of its requests (none)
  for (const auto& line : errors) EXPECT_NE(line.find("lost"), std::string::npos) << line;
}

TEST_F(scaleout_test, a_deadline_reaches_an_executor_on_another_clock_as_what_is_left) {
  // The executor's clock is another machine's: ten hours ahead of the batcher's, and running
  // fast (one second per reading), so that no test waits for real time. A deadline sent as the
  // batcher's stamp would have passed there at once; sent as what is left (60 s) it holds for
  // 60 s of the executor's own clock, then expires there.
  auto tok = tokenizers::load_tokenizer(test::source_path("models/stories260K/tok512.model"));
  ASSERT_TRUE(tok);
  model::runtime_options opt;
  opt.slots = 2;
  auto m = model::load_model(test::stories_model(), opt);
  ASSERT_TRUE(m);
  auto core = std::make_unique<pipeline::executor_core>("remote", std::move(*m), *tok);
  auto worker_clock = std::make_shared<std::atomic<stamp>>(now_stamp() + 10 * 3600 * 1'000'000'000LL);
  core->set_clock([worker_clock] { return worker_clock->fetch_add(1'000'000'000); });
  auto metrics = spawn_metrics(sys, 0);
  auto tokenizers = spawn_tokenizer_pool(sys, 1, *tok, 512);
  auto batcher = spawn_batcher(sys, batcher_settings{}, tokenizers, metrics);
  auto executor = spawn_executor(sys, std::move(core), 1, batcher, metrics);
  std::map<request_id, ending> out;
  {
    caf::scoped_actor self{sys};
    auto limited = make_request(1, 400);
    limited.params.ignore_eos = true;
    limited.timeout_s = 60;
    auto unlimited = make_request(2, 40);  // no deadline: none on the executor either
    for (const auto& r : {limited, unlimited})
      caf::anon_send(batcher, atom::generate::value, r, caf::actor_cast<sink_actor>(self));
    collect(self, out, 2);
  }
  ASSERT_EQ(out[1].results.size(), 1u);
  const auto& expired = out[1].results[0];
  EXPECT_EQ(expired.how, outcome::expired) << expired.message;
  EXPECT_EQ(expired.code, ec::expired);
  EXPECT_GT(expired.completion_tokens, 0) << "the deadline must not pass at once: " << expired.message;
  EXPECT_LT(expired.completion_tokens, 60) << "60 s of the executor's clock are fewer than 60 steps";
  ASSERT_EQ(out[2].results.size(), 1u);
  EXPECT_EQ(out[2].results[0].how, outcome::finished) << out[2].results[0].message;
  for (const caf::actor& a :
       {caf::actor_cast<caf::actor>(executor), caf::actor_cast<caf::actor>(batcher),
        caf::actor_cast<caf::actor>(tokenizers), caf::actor_cast<caf::actor>(metrics)})
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_F(scaleout_test, killing_one_of_two_executors_mid_run_ends_every_request_once) {
  auto h = spawn_pipeline(sys, make_config(2));
  ASSERT_TRUE(h) << message_of(h.error());
  std::map<request_id, ending> out;
  {
    caf::scoped_actor self{sys};
    const size_t count = 24;
    for (request_id id = 1; id <= count; ++id)
      caf::anon_send(h->front, atom::generate::value, make_request(id, 64),
                     caf::actor_cast<sink_actor>(self));
    // Kill the first executor once tokens flow.
    bool timed_out = false;
    self->receive(
        [&](token_chunk& c) {
          out[c.id].text += c.text;
          ++out[c.id].chunks;
        },
        caf::after(30s) >> [&] { timed_out = true; });
    ASSERT_FALSE(timed_out);
    self->monitor(h->executors[0]);
    caf::anon_send_exit(h->executors[0], caf::exit_reason::kill);
    collect(self, out, count);
    // The kill happened: the executor went down for it, not for another reason.
    caf::error down_reason;
    self->receive([&](caf::down_msg& dm) { down_reason = dm.reason; },
                  caf::after(30s) >> [] {});
    EXPECT_EQ(down_reason, caf::exit_reason::kill) << "the killed executor must have gone down";
    for (request_id id = 1; id <= count; ++id) {
      const auto& e = out[id];
      ASSERT_EQ(e.results.size(), 1u) << "request " << id;
      const auto& r = e.results[0];
      if (r.how == outcome::failed) {
        EXPECT_EQ(r.code, ec::executor_lost);
        EXPECT_GE(e.chunks, 1u) << "a request that streamed nothing should have run again";
      } else {
        EXPECT_EQ(r.how, outcome::finished) << r.message;
      }
    }
    // Nothing arrives after the ends.
    bool extra = false;
    self->receive([&](token_chunk&) { extra = true; }, [&](request_result&) { extra = true; },
                  caf::after(200ms) >> [] {});
    EXPECT_FALSE(extra);
  }
  stop_pipeline(*h);
}

}  // namespace


