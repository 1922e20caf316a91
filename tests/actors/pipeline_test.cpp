// The whole actor pipeline on the real stories260K model: exact answers under every policy,
// every request ending exactly once, cancellation, back-pressure, deadlines, two executors.
#include <map>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "../model/test_support.hpp"
#include "actors/caf_error.hpp"
#include "actors/spawn.hpp"
#include "model/causal_lm.hpp"
#include "model/tokenizer.hpp"
#include "pipeline/executor_core.hpp"

using namespace conveyor;
using namespace std::chrono_literals;

namespace {

struct answer {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<request_result> results;  // exactly one expected
  bool chunk_after_result = false;
};

config::pipeline make_config(const std::string& policy, int64_t slots, size_t executors = 1) {
  config::pipeline cfg;
  cfg.auto_executors = false;
  for (size_t i = 0; i < executors; ++i) {
    config::executor e;
    e.threads = 1;
    e.slots = slots;
    cfg.executors.push_back(e);
  }
  cfg.batcher.policy = policy;
  cfg.batcher.max_batch_size = std::min<int64_t>(slots, 8);
  cfg.batcher.max_num_seqs = slots;
  cfg.metrics.interval_s = 0;
  return cfg;
}

class pipeline_test : public ::testing::Test {
 protected:
  static caf::actor_system_config& init(caf::actor_system_config& cfg) {
    add_error_category(cfg);
    cfg.set("logger.verbosity", caf::atom("quiet"));
    return cfg;
  }

  void TearDown() override {
    if (handle) stop_pipeline(*handle);
  }

  void start(const config::pipeline& cfg) {
    auto h = spawn_pipeline(sys, cfg);
    ASSERT_TRUE(h) << message_of(h.error());
    handle = std::move(*h);
  }

  generate_request make_request(request_id id, const std::string& prompt, int32_t max_tokens) {
    generate_request r;
    r.id = id;
    r.prompt = prompt;
    r.params.max_tokens = max_tokens;
    r.params.temperature = 0;
    return r;
  }

  void send(caf::scoped_actor& self, generate_request req) {
    caf::anon_send(handle->front, atom::generate::value, std::move(req),
                   caf::actor_cast<sink_actor>(self));
  }

  // Receives until `count` results arrived (or `timeout` passes without any message).
  std::map<request_id, answer> collect(
      caf::scoped_actor& self, size_t count, std::chrono::seconds timeout = 60s,
      const std::function<void(const token_chunk&)>& on_chunk = {}) {
    std::map<request_id, answer> out;
    size_t results = 0;
    bool timed_out = false;
    while (results < count && !timed_out) {
      self->receive(
          [&](token_chunk& c) {
            auto& a = out[c.id];
            if (!a.results.empty()) a.chunk_after_result = true;
            a.text += c.text;
            a.tokens.insert(a.tokens.end(), c.tokens.begin(), c.tokens.end());
            if (on_chunk) on_chunk(c);
          },
          [&](request_result& r) {
            out[r.id].text += r.tail;
            out[r.id].results.push_back(r);
            ++results;
          },
          caf::after(timeout) >> [&] { timed_out = true; });
    }
    EXPECT_FALSE(timed_out) << "only " << results << " of " << count << " requests ended";
    return out;
  }

  // What each prompt gives alone, through the executor's scheduler as `conveyor generate` runs it.
  std::pair<std::string, std::vector<int32_t>> alone(const std::string& prompt,
                                                     int32_t max_tokens) {
    auto tok = model::load_tokenizer(test::source_path("models/stories260K/tok512.model"));
    model::runtime_options opt;
    opt.slots = 1;
    auto m = model::load_model(test::stories_model(), opt);
    pipeline::executor_core core{"alone", std::move(*m), *tok};
    sequence_request r;
    r.id = 1;
    r.prompt = (*tok)->encode(prompt, true);
    r.params.max_tokens = max_tokens;
    r.params.temperature = 0;
    pipeline::step_output out;
    core.admit({r}, false, out);
    std::pair<std::string, std::vector<int32_t>> result;
    while (core.has_work()) {
      auto s = core.step();
      for (auto& c : s.chunks) {
        result.first += c.text;
        result.second.insert(result.second.end(), c.tokens.begin(), c.tokens.end());
      }
      for (auto& x : s.results) result.first += x.tail;
    }
    return result;
  }

  nlohmann::json snapshot() {
    caf::scoped_actor self{sys};
    std::string text;
    self->request(handle->front, 10s, atom::snapshot::value)
        .receive([&](std::string& s) { text = s; },
                 [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return nlohmann::json::parse(text);
  }

  caf::actor_system_config cfg;
  caf::actor_system sys{init(cfg)};
  std::optional<pipeline_handle> handle;
};

const std::vector<std::pair<std::string, int32_t>> mix = {
    {"Once upon a time", 60},
    {"Tom had a red ball.", 12},
    {"The cat", 40},
    {"One day, a big dog ran to the park and saw a bird.", 25},
    {"Lily and Ben were friends. They liked to play in the garden with their toys.", 7},
    {"Sue", 33},
    {"The sun was hot and the sky was blue. A little boy", 50},
    {"Mom said no.", 3},
    {"Once upon a time, there was a", 45},
    {"A fish", 20},
    {"The old man walked to the store to buy some bread and milk for his family.", 30},
    {"Bob", 1},
};

}  // namespace

class policy_test : public pipeline_test, public ::testing::WithParamInterface<std::string> {};

TEST_P(policy_test, every_request_gets_exactly_its_alone_tokens) {
  start(make_config(GetParam(), 4));
  caf::scoped_actor self{sys};
  for (size_t i = 0; i < mix.size(); ++i)
    send(self, make_request(100 + i, mix[i].first, mix[i].second));
  auto out = collect(self, mix.size());
  ASSERT_EQ(out.size(), mix.size());
  for (size_t i = 0; i < mix.size(); ++i) {
    auto& a = out[100 + i];
    ASSERT_EQ(a.results.size(), 1u);
    EXPECT_EQ(a.results[0].how, outcome::finished) << a.results[0].message;
    auto [text, tokens] = alone(mix[i].first, mix[i].second);
    EXPECT_EQ(a.tokens, tokens) << "request " << i << " under " << GetParam();
    EXPECT_EQ(a.text, text) << "request " << i << " under " << GetParam();
  }
  auto expected = test::load_expected_run();
  EXPECT_EQ(out[100].tokens, expected.generated());
  EXPECT_EQ(mix[0].first + out[100].text + "\n", expected.text);
}

INSTANTIATE_TEST_SUITE_P(policies, policy_test,
                         ::testing::Values("sequential", "seed", "continuous"));

TEST_F(pipeline_test, every_request_ends_exactly_once_under_random_load) {
  for (const std::string policy : {"continuous", "seed", "sequential"}) {
    SCOPED_TRACE(policy);
    auto cfg = make_config(policy, 8);
    cfg.batcher.max_queued_requests = 12;
    cfg.batcher.max_wait_ms = 2;
    start(cfg);
    caf::scoped_actor self{sys};
    std::mt19937 rng(policy.size());
    const size_t n = policy == "continuous" ? 1000 : 300;
    std::set<request_id> cancelled_later;
    for (size_t i = 0; i < n; ++i) {
      const auto& m = mix[rng() % mix.size()];
      auto r = make_request(1 + i, m.first, 1 + int32_t(rng() % 24));
      r.priority = int32_t(rng() % 3);
      if (rng() % 10 == 0) r.timeout_s = 0.001 * (1 + rng() % 20);
      if (rng() % 3 == 0) r.params.temperature = 0.7f, r.params.seed = rng();
      send(self, r);
      if (rng() % 8 == 0)
        caf::anon_send(handle->front, atom::cancel::value, request_id(1 + rng() % (i + 1)));
      // Random arrivals: most follow at once, one in five after a gap of up to 4 ms; the
      // bursts in between outgrow 8 slots plus a queue of 12, so some meet a full queue.
      if (rng() % 5 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 4000));
    }
    auto out = collect(self, n, 120s);
    std::map<outcome, size_t> counts;
    for (size_t i = 1; i <= n; ++i) {
      auto it = out.find(i);
      ASSERT_NE(it, out.end()) << "request " << i << " never ended";
      ASSERT_EQ(it->second.results.size(), 1u) << "request " << i;
      EXPECT_FALSE(it->second.chunk_after_result) << "request " << i;
      ++counts[it->second.results[0].how];
    }
    // Nothing more arrives: no request ends twice.
    bool extra = false;
    self->receive([&](token_chunk&) { extra = true; }, [&](request_result&) { extra = true; },
                  caf::after(200ms) >> [] {});
    EXPECT_FALSE(extra);
    std::printf("%s: finished %zu cancelled %zu expired %zu rejected %zu failed %zu\n",
                policy.c_str(), counts[outcome::finished], counts[outcome::cancelled],
                counts[outcome::expired], counts[outcome::rejected], counts[outcome::failed]);
    EXPECT_GT(counts[outcome::finished], 0u);
    EXPECT_GT(counts[outcome::rejected], 0u) << "the queue bound should reject some";
    EXPECT_GT(counts[outcome::cancelled], 0u);
    // The metrics saw the same outcomes (events arrive in batches: wait until all are in).
    nlohmann::json snap;
    for (int attempt = 0; attempt < 100; ++attempt) {
      snap = snapshot();
      if (snap["requests"]["total"].get<size_t>() >= n) break;
      std::this_thread::sleep_for(20ms);
    }
    for (auto how : {outcome::finished, outcome::cancelled, outcome::expired, outcome::rejected,
                     outcome::failed})
      EXPECT_EQ(snap["requests"][to_string(how)].get<size_t>(), counts[how]) << to_string(how);
    stop_pipeline(*handle);
    handle.reset();
  }
}

TEST_F(pipeline_test, cancelling_a_running_request_frees_its_slot_for_a_waiting_one) {
  start(make_config("continuous", 1));
  caf::scoped_actor self{sys};
  auto long_one = make_request(1, "Once upon a time", 400);
  long_one.params.ignore_eos = true;
  send(self, long_one);
  // Tokenizer workers run in parallel: send the second once the first runs.
  self->receive([](token_chunk&) {}, caf::after(10s) >> [] { FAIL() << "no output"; });
  send(self, make_request(2, "The cat", 5));
  // Once the first has streamed a few more tokens, the second is still waiting: one slot.
  size_t chunks = 0;
  bool cancelled = false;
  auto out = collect(self, 2, 30s, [&](const token_chunk& c) {
    if (c.id == 1 && ++chunks == 3 && !cancelled) {
      cancelled = true;
      caf::anon_send(handle->front, atom::cancel::value, request_id{1});
    }
    if (c.id == 2) {
      EXPECT_TRUE(cancelled) << "the second request ran before a slot was free";
    }
  });
  ASSERT_EQ(out[1].results.size(), 1u);
  EXPECT_EQ(out[1].results[0].how, outcome::cancelled);
  EXPECT_LT(out[1].results[0].completion_tokens, 400);
  ASSERT_EQ(out[2].results.size(), 1u);
  EXPECT_EQ(out[2].results[0].how, outcome::finished);
  EXPECT_EQ(out[2].tokens.size(), 5u);
}

TEST_F(pipeline_test, a_full_queue_rejects_at_once) {
  auto cfg = make_config("continuous", 1);
  cfg.batcher.max_queued_requests = 2;
  cfg.model.path = "synthetic:s15m";  // slow enough that request 1 runs throughout
  start(cfg);
  caf::scoped_actor self{sys};
  auto long_one = make_request(1, "Once upon a time", 300);
  long_one.params.ignore_eos = true;
  send(self, long_one);
  // Wait until it runs, then fill the queue and overflow it.
  self->receive([](token_chunk&) {}, caf::after(10s) >> [] { FAIL() << "no output"; });
  send(self, make_request(2, "The cat", 3));
  send(self, make_request(3, "The dog", 3));
  send(self, make_request(4, "The bird", 3));
  request_result rejected;
  bool got = false;
  while (!got) {
    self->receive([](token_chunk&) {},
                  [&](request_result& r) {
                    rejected = r;
                    got = true;
                  },
                  caf::after(10s) >> [&] { got = true; });
  }
  // The first result is the rejection, while request 1 still runs. Tokenizer workers run in
  // parallel, so any one of the three may be the one that finds the queue full.
  EXPECT_TRUE(rejected.id >= 2 && rejected.id <= 4) << rejected.id;
  EXPECT_EQ(rejected.how, outcome::rejected);
  EXPECT_EQ(rejected.code, ec::rejected_queue_full);
  EXPECT_EQ(rejected.message, "queue full: 2 requests waiting (max 2)");
  caf::anon_send(handle->front, atom::cancel::value, request_id{1});
  auto rest = collect(self, 3);
  EXPECT_EQ(rest[1].results.at(0).how, outcome::cancelled);
  for (request_id id = 2; id <= 4; ++id) {
    if (id == rejected.id) continue;
    EXPECT_EQ(rest[id].results.at(0).how, outcome::finished) << id;
  }
}

TEST_F(pipeline_test, a_request_whose_deadline_passes_while_waiting_expires) {
  // A slow model (random s15m weights, about 3 ms a token here) keeps the slot busy.
  auto cfg = make_config("continuous", 1);
  cfg.model.path = "synthetic:s15m";
  start(cfg);
  caf::scoped_actor self{sys};
  auto long_one = make_request(1, "Once upon a time", 300);
  long_one.params.ignore_eos = true;
  send(self, long_one);
  self->receive([](token_chunk&) {}, caf::after(10s) >> [] { FAIL() << "no output"; });
  auto waiting = make_request(2, "The cat", 5);
  waiting.timeout_s = 0.05;
  send(self, waiting);
  request_result first;
  bool got = false;
  while (!got)
    self->receive([](token_chunk&) {},
                  [&](request_result& r) {
                    first = r;
                    got = true;
                  },
                  caf::after(10s) >> [&] { got = true; });
  EXPECT_EQ(first.id, 2u);
  EXPECT_EQ(first.how, outcome::expired);
  EXPECT_EQ(first.code, ec::expired);
  EXPECT_EQ(first.message, "deadline passed while waiting in the queue");
  caf::anon_send(handle->front, atom::cancel::value, request_id{1});
  collect(self, 1);
}

TEST_F(pipeline_test, a_prompt_too_long_for_the_context_is_rejected) {
  start(make_config("continuous", 2));
  caf::scoped_actor self{sys};
  send(self, make_request(1, "Once upon a time", 510));
  auto out = collect(self, 1);
  ASSERT_EQ(out[1].results.size(), 1u);
  EXPECT_EQ(out[1].results[0].how, outcome::rejected);
  EXPECT_EQ(out[1].results[0].code, ec::prompt_too_long);
  EXPECT_EQ(out[1].results[0].message,
            "the prompt has 5 tokens and max_tokens is 510: together 515, more than the "
            "context of 512 tokens");
}

TEST_F(pipeline_test, two_executors_share_the_load) {
  start(make_config("continuous", 2, 2));
  caf::scoped_actor self{sys};
  for (request_id i = 1; i <= 16; ++i) {
    auto r = make_request(i, mix[i % mix.size()].first, 40);
    r.params.ignore_eos = true;
    send(self, r);
  }
  auto out = collect(self, 16);
  for (request_id i = 1; i <= 16; ++i) EXPECT_EQ(out[i].results.at(0).how, outcome::finished);
  nlohmann::json busy;
  for (int attempt = 0; attempt < 100; ++attempt) {
    busy = snapshot()["gauges"]["executor_busy_ratio"];
    if (busy.size() == 2) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(busy.size(), 2u) << busy.dump();
  for (auto& [name, ratio] : busy.items()) EXPECT_GT(ratio.get<double>(), 0.0) << name;
}
