// The whole actor pipeline on the real stories260K model: exact answers under every policy,
// every request ending exactly once, cancellation, back-pressure, deadlines, two executors.
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "tests/support/model_files.hpp"
#include "actors/batcher_actor.hpp"
#include "actors/caf_error.hpp"
#include "actors/executor_actor.hpp"
#include "actors/metrics_actor.hpp"
#include "actors/spawn.hpp"
#include "actors/tokenizer_actor.hpp"
#include "model/causal_lm.hpp"
#include "tokenizers/tokenizer.hpp"
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

/// Polls `pred` until it holds or `timeout` passes (a guard against hangs, not a measurement);
/// returns its last value.
bool eventually(const std::function<bool()>& pred, std::chrono::seconds timeout = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

/// The clock of an executor that a test can stop and move: once `budget` readings are used up,
/// the executor's thread waits in its next reading (the first is where it takes work, then a few
/// each step) until `open`, so whatever it took stays taken and unfinished meanwhile; `leap`
/// puts it ahead of the steady clock, so that deadlines on that executor pass when the test says.
class clock_gate {
 public:
  explicit clock_gate(int budget = 0) : budget_(budget) {}

  stamp read() {
    std::unique_lock<std::mutex> lock{mutex_};
    if (!open_ && budget_ == 0) {
      ++waiting_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return open_; });
      --waiting_;
    } else if (!open_) {
      --budget_;
    }
    return now_stamp() + ahead_;
  }

  /// Lets every reading through from now on.
  void open() {
    {
      std::lock_guard<std::mutex> lock{mutex_};
      open_ = true;
    }
    changed_.notify_all();
  }

  /// Closes the gate again once `budget` more readings passed.
  void hold_after(int budget) {
    std::lock_guard<std::mutex> lock{mutex_};
    open_ = false;
    budget_ = budget;
  }

  /// Moves the clock `by` nanoseconds further ahead of the steady clock.
  void leap(stamp by) {
    std::lock_guard<std::mutex> lock{mutex_};
    ahead_ += by;
  }

  /// Waits until the executor stopped at the gate; false after `timeout` (a guard).
  bool wait_until_holding(std::chrono::seconds timeout = 30s) {
    std::unique_lock<std::mutex> lock{mutex_};
    return changed_.wait_for(lock, timeout, [&] { return waiting_ > 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int budget_;
  int waiting_ = 0;
  bool open_ = false;
  stamp ahead_ = 0;
};

/// Opens a gate on every way out of a test (the actor system's destructor waits for the
/// executor that the gate holds).
struct opens_at_exit {
  std::shared_ptr<clock_gate> gate;
  ~opens_at_exit() { gate->open(); }
};

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

  void start(const config::pipeline& cfg, const spawn_options& options = {}) {
    auto h = spawn_pipeline(sys, cfg, options);
    ASSERT_TRUE(h) << message_of(h.error());
    handle = std::move(*h);
  }

  /// An executor core on stories260K with `slots` slots, reading time from `gate` when given.
  std::unique_ptr<pipeline::executor_core> make_core(const std::string& name, int32_t slots,
                                                     std::shared_ptr<clock_gate> gate = nullptr) {
    auto tok = tokenizers::load_tokenizer(test::source_path("models/stories260K/tok512.model"));
    EXPECT_TRUE(tok) << message_of(tok.error());
    model::runtime_options opt;
    opt.slots = slots;
    auto m = model::load_model(test::stories_model(), opt);
    EXPECT_TRUE(m) << message_of(m.error());
    auto core = std::make_unique<pipeline::executor_core>(name, std::move(*m), *tok);
    if (gate) core->set_clock([gate] { return gate->read(); });
    return core;
  }

  /// Starts a batcher with `bs` (the continuous policy unless it names another), tokenizers and
  /// metrics around these executor cores; `attach` false leaves the executors unattached until
  /// `attach_executor`.
  void start_cores(std::vector<std::unique_ptr<pipeline::executor_core>> cores,
                   batcher_settings bs, bool attach = true) {
    auto tok = tokenizers::load_tokenizer(test::source_path("models/stories260K/tok512.model"));
    ASSERT_TRUE(tok) << message_of(tok.error());
    pipeline_handle h;
    h.metrics = spawn_metrics(sys, 0);
    h.tokenizers = spawn_tokenizer_pool(sys, 2, *tok, 512);
    auto batcher = spawn_batcher(sys, bs, h.tokenizers, h.metrics);
    h.front = caf::actor_cast<pipeline_actor>(batcher);
    for (auto& core : cores)
      h.executors.push_back(
          spawn_executor(sys, std::move(core), 1, attach ? batcher : batcher_actor{}, h.metrics));
    handle = h;
  }

  void attach_executor(size_t i) {
    caf::anon_send(handle->executors.at(i), atom::attach::value,
                   batcher_ref{caf::actor_cast<batcher_actor>(handle->front)});
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
    auto tok = tokenizers::load_tokenizer(test::source_path("models/stories260K/tok512.model"));
    model::runtime_options opt;
    opt.slots = 1;
    auto m = model::load_model(test::stories_model(), opt);
    pipeline::executor_core core{"alone", std::move(*m), *tok};
    sequence_request r;
    r.id = 1;
    r.prompt = *(*tok)->encode(prompt, true);
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

  pipeline_status status() {
    caf::scoped_actor self{sys};
    pipeline_status s;
    self->request(handle->front, 10s, atom::status::value)
        .receive([&](pipeline_status& x) { s = x; },
                 [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return s;
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

/// Adds what `more` holds to `into`: chunks after the ones already there, results after theirs;
/// a chunk of a request that had already ended is marked.
void absorb(std::map<request_id, answer>& into, const std::map<request_id, answer>& more) {
  for (const auto& [id, a] : more) {
    auto& to = into[id];
    to.text += a.text;
    to.tokens.insert(to.tokens.end(), a.tokens.begin(), a.tokens.end());
    if (!to.results.empty() && !a.tokens.empty()) to.chunk_after_result = true;
    to.chunk_after_result = to.chunk_after_result || a.chunk_after_result;
    to.results.insert(to.results.end(), a.results.begin(), a.results.end());
  }
}

/// Requests in `answers` that have ended (a result arrived).
size_t ended(const std::map<request_id, answer>& answers) {
  size_t n = 0;
  for (const auto& [id, a] : answers) n += a.results.empty() ? 0 : 1;
  return n;
}

/// Receives into `answers` until a request ends otherwise than refused (the pipeline made
/// progress: one finished, or was cancelled or expired), or until all `sent` requests ended.
/// It ends: while a request is open, one that is not refused is open too (a refusal means a
/// full queue, of open requests).
void wait_for_progress(caf::scoped_actor& self, std::map<request_id, answer>& answers,
                       size_t sent) {
  bool progress = false;
  while (!progress && ended(answers) < sent) {
    bool timed_out = false;
    self->receive(
        [&](token_chunk& c) {
          auto& a = answers[c.id];
          if (!a.results.empty()) a.chunk_after_result = true;
          a.text += c.text;
          a.tokens.insert(a.tokens.end(), c.tokens.begin(), c.tokens.end());
        },
        [&](request_result& r) {
          auto& a = answers[r.id];
          a.text += r.tail;
          a.results.push_back(r);
          progress = r.how != outcome::rejected;
        },
        caf::after(std::chrono::seconds{60}) >> [&] { timed_out = true; });
    ASSERT_FALSE(timed_out) << "no request ended for a minute";
  }
}

TEST_F(pipeline_test, every_request_ends_exactly_once_under_random_load) {
  // No outcome here depends on the machine's speed: a deadline is either past when the request
  // arrives, or an hour away on the executor's clock, which the test moves ahead (a leap) at
  // chosen points; and arrivals wait for events (a request ending), never for a time.
  constexpr stamp one_second = 1'000'000'000;
  constexpr stamp two_hours = 7200 * one_second;
  for (const std::string policy : {"continuous", "seed", "sequential"}) {
    SCOPED_TRACE(policy);
    auto clock = std::make_shared<clock_gate>();
    clock->open();
    opens_at_exit opener{clock};
    std::vector<std::unique_ptr<pipeline::executor_core>> cores;
    cores.push_back(make_core("random", 8, clock));
    batcher_settings bs;
    bs.options.policy = *pipeline::parse_policy(policy);
    bs.options.max_batch_size = 8;
    bs.options.max_num_seqs = 8;
    bs.options.max_queued_requests = 12;
    bs.options.max_wait_s = 0.002;
    // The executor takes work only once the opening burst has met the queue bound.
    start_cores(std::move(cores), bs, false);
    caf::scoped_actor self{sys};
    std::mt19937 rng(policy.size());
    const size_t n = policy == "continuous" ? 1000 : 300;
    auto random_request = [&](size_t i) {
      const auto& m = mix[rng() % mix.size()];
      auto r = make_request(1 + i, m.first, 1 + int32_t(rng() % 24));
      r.priority = int32_t(rng() % 3);
      if (rng() % 3 == 0) r.params.temperature = 0.7f, r.params.seed = rng();
      return r;
    };
    // A deadline that passed before the request reached the pipeline (it arrived a second ago
    // with a millisecond to live).
    std::set<request_id> past_deadline;
    auto make_late = [&](generate_request& r) {
      r.arrival = now_stamp() - one_second;
      r.timeout_s = 0.001;
      past_deadline.insert(r.id);
    };
    std::set<request_id> no_deadline;
    // The opening burst, before any executor can take work, whatever the machine's speed: twelve
    // requests wait and the other four find the queue full.
    const size_t burst = 16;
    const size_t bound = size_t(bs.options.max_queued_requests);
    for (size_t i = 0; i < burst; ++i) {
      no_deadline.insert(1 + i);
      send(self, random_request(i));
    }
    auto out = collect(self, burst - bound);
    ASSERT_EQ(out.size(), burst - bound);
    request_id waiting = 0;
    for (request_id id = 1; id <= burst; ++id) {
      auto it = out.find(id);
      if (it == out.end()) {
        if (waiting == 0) waiting = id;
        continue;
      }
      ASSERT_EQ(it->second.results.size(), 1u) << "request " << id;
      EXPECT_EQ(it->second.results[0].how, outcome::rejected) << it->second.results[0].message;
      EXPECT_EQ(it->second.results[0].code, ec::rejected_queue_full);
    }
    // One of the waiting ones is cancelled where it waits.
    caf::anon_send(handle->front, atom::cancel::value, waiting);
    auto cancelled = collect(self, 1);
    ASSERT_EQ(cancelled[waiting].results.size(), 1u);
    EXPECT_EQ(cancelled[waiting].results[0].how, outcome::cancelled);
    absorb(out, cancelled);
    // The place it left takes a request whose deadline has passed: it expires in the queue.
    {
      auto late = random_request(burst);
      make_late(late);
      send(self, late);
      auto expired = collect(self, 1);
      ASSERT_EQ(expired[late.id].results.size(), 1u);
      EXPECT_EQ(expired[late.id].results[0].how, outcome::expired)
          << expired[late.id].results[0].message;
      EXPECT_EQ(expired[late.id].results[0].message, "deadline passed while waiting in the queue");
      absorb(out, expired);
    }
    const size_t opening = burst + 1;
    attach_executor(0);
    // Then random load on the running executor: cancellations of random earlier requests,
    // deadlines past on arrival or an hour away, leaps of the executor's clock past those hours
    // (whatever runs then expires at its next step), and arrivals of which one in three
    // follows at once, the others only once the pipeline made progress (a request ended
    // otherwise than refused).
    for (size_t i = opening; i < n - 1; ++i) {
      auto r = random_request(i);
      switch (rng() % 10) {
        case 0:
          make_late(r);
          break;
        case 1:
        case 2:
          r.timeout_s = 3600;
          break;
        default:
          no_deadline.insert(r.id);
      }
      send(self, r);
      if (rng() % 8 == 0)
        caf::anon_send(handle->front, atom::cancel::value, request_id(1 + rng() % (i + 1)));
      if (rng() % 10 == 0) clock->leap(two_hours);
      if (rng() % 3 != 0) wait_for_progress(self, out, i + 1);
    }
    absorb(out, collect(self, (n - 1) - ended(out), 120s));
    // Last, alone on the executor: a long request with an hour to live. The executor stops
    // after a few steps of it, its clock leaps two hours, and it goes on: the request expires
    // at its next step, long before its 400 tokens.
    {
      clock->hold_after(20);
      auto last = make_request(n, "Once upon a time", 400);
      last.params.ignore_eos = true;
      last.timeout_s = 3600;
      send(self, last);
      ASSERT_TRUE(clock->wait_until_holding());
      clock->leap(two_hours);
      clock->open();
      auto expired = collect(self, 1);
      ASSERT_EQ(expired[n].results.size(), 1u);
      EXPECT_EQ(expired[n].results[0].how, outcome::expired) << expired[n].results[0].message;
      EXPECT_LT(expired[n].tokens.size(), 400u);
      EXPECT_EQ(expired[n].results[0].message.rfind("deadline passed after ", 0), 0u)
          << expired[n].results[0].message;
      absorb(out, expired);
    }
    std::map<outcome, size_t> counts;
    size_t expired_running = 0;
    for (request_id id = 1; id <= n; ++id) {
      auto it = out.find(id);
      ASSERT_NE(it, out.end()) << "request " << id << " never ended";
      const auto& a = it->second;
      ASSERT_EQ(a.results.size(), 1u) << "request " << id;
      EXPECT_FALSE(a.chunk_after_result) << "request " << id;
      const auto how = a.results[0].how;
      ++counts[how];
      if (a.results[0].message.rfind("deadline passed after", 0) == 0) ++expired_running;
      if (no_deadline.count(id)) {
        EXPECT_NE(how, outcome::expired) << "request " << id;
      }
      if (past_deadline.count(id)) {
        EXPECT_NE(how, outcome::finished) << "request " << id;
        EXPECT_TRUE(a.tokens.empty()) << "request " << id;
      }
    }
    // Nothing more arrives: no request ends twice.
    bool extra = false;
    self->receive([&](token_chunk&) { extra = true; }, [&](request_result&) { extra = true; },
                  caf::after(200ms) >> [] {});
    EXPECT_FALSE(extra);
    std::printf(
        "%s: finished %zu cancelled %zu expired %zu (%zu while running) rejected %zu failed %zu\n",
        policy.c_str(), counts[outcome::finished], counts[outcome::cancelled],
        counts[outcome::expired], expired_running, counts[outcome::rejected],
        counts[outcome::failed]);
    EXPECT_GT(counts[outcome::finished], 0u);
    EXPECT_GE(counts[outcome::rejected], burst - bound);
    EXPECT_GE(counts[outcome::cancelled], 1u);
    EXPECT_GE(counts[outcome::expired], 2u);
    EXPECT_EQ(counts[outcome::failed], 0u);
    // The metrics saw the same outcomes (events arrive in batches: wait until all are in).
    nlohmann::json snap;
    EXPECT_TRUE(eventually([&] {
      snap = snapshot();
      return snap["requests"]["total"].get<size_t>() >= n;
    })) << snap.dump();
    for (auto how : {outcome::finished, outcome::cancelled, outcome::expired, outcome::rejected,
                     outcome::failed})
      EXPECT_EQ(snap["requests"][to_string(how)].get<size_t>(), counts[how]) << to_string(how);
    stop_pipeline(*handle);
    handle.reset();
  }
}

TEST_F(pipeline_test, cancelling_a_running_request_frees_its_slot_for_a_waiting_one) {
  // One slot, on an executor that stops a few steps into its work until the gate opens: the
  // long request cannot end on its own while the test looks.
  auto gate = std::make_shared<clock_gate>(20);
  opens_at_exit opener{gate};
  std::vector<std::unique_ptr<pipeline::executor_core>> cores;
  cores.push_back(make_core("held", 1, gate));
  start_cores(std::move(cores), {});
  caf::scoped_actor self{sys};
  auto long_one = make_request(1, "Once upon a time", 400);
  long_one.params.ignore_eos = true;
  send(self, long_one);
  self->receive([](token_chunk&) {}, caf::after(30s) >> [] { FAIL() << "no output"; });
  ASSERT_TRUE(gate->wait_until_holding());
  send(self, make_request(2, "The cat", 5));
  // The second waits: the one slot is the first's.
  pipeline_status st;
  ASSERT_TRUE(eventually([&] {
    st = status();
    return st.waiting == 1 && st.running == 1;
  })) << "waiting " << st.waiting << ", running " << st.running;
  caf::anon_send(handle->front, atom::cancel::value, request_id{1});
  gate->open();
  auto out = collect(self, 2, 30s);
  ASSERT_EQ(out[1].results.size(), 1u);
  EXPECT_EQ(out[1].results[0].how, outcome::cancelled);
  EXPECT_LT(out[1].results[0].completion_tokens, 400);
  ASSERT_EQ(out[2].results.size(), 1u);
  EXPECT_EQ(out[2].results[0].how, outcome::finished);
  EXPECT_EQ(out[2].tokens.size(), 5u);
}

TEST_F(pipeline_test, a_full_queue_rejects_at_once) {
  // Request 1 holds the one slot of an executor stopped at its gate, so nothing ends before
  // the test lets it.
  auto gate = std::make_shared<clock_gate>();
  opens_at_exit opener{gate};
  std::vector<std::unique_ptr<pipeline::executor_core>> cores;
  cores.push_back(make_core("held", 1, gate));
  batcher_settings bs;
  bs.options.max_queued_requests = 2;
  start_cores(std::move(cores), bs);
  caf::scoped_actor self{sys};
  auto long_one = make_request(1, "Once upon a time", 300);
  long_one.params.ignore_eos = true;
  send(self, long_one);
  ASSERT_TRUE(gate->wait_until_holding());
  // Fill the queue and overflow it.
  send(self, make_request(2, "The cat", 3));
  send(self, make_request(3, "The dog", 3));
  send(self, make_request(4, "The bird", 3));
  auto first = collect(self, 1);
  ASSERT_EQ(first.size(), 1u);
  // The first result is the rejection, while request 1 still runs. Tokenizer workers run in
  // parallel, so any one of the three may be the one that finds the queue full.
  const auto& [rejected_id, rejected_answer] = *first.begin();
  ASSERT_EQ(rejected_answer.results.size(), 1u);
  const auto& rejected = rejected_answer.results[0];
  EXPECT_TRUE(rejected_id >= 2 && rejected_id <= 4) << rejected_id;
  EXPECT_EQ(rejected.how, outcome::rejected);
  EXPECT_EQ(rejected.code, ec::rejected_queue_full);
  EXPECT_EQ(rejected.message, "queue full: 2 requests waiting (max 2)");
  caf::anon_send(handle->front, atom::cancel::value, request_id{1});
  gate->open();
  auto rest = collect(self, 3);
  EXPECT_EQ(rest[1].results.at(0).how, outcome::cancelled);
  for (request_id id = 2; id <= 4; ++id) {
    if (id == rejected_id) continue;
    EXPECT_EQ(rest[id].results.at(0).how, outcome::finished) << id;
  }
}

TEST_F(pipeline_test, a_request_whose_deadline_passes_while_waiting_expires) {
  // Request 1 holds the one slot of an executor stopped at its gate until the test opens it.
  auto gate = std::make_shared<clock_gate>();
  opens_at_exit opener{gate};
  std::vector<std::unique_ptr<pipeline::executor_core>> cores;
  cores.push_back(make_core("held", 1, gate));
  start_cores(std::move(cores), {});
  caf::scoped_actor self{sys};
  auto long_one = make_request(1, "Once upon a time", 300);
  long_one.params.ignore_eos = true;
  send(self, long_one);
  ASSERT_TRUE(gate->wait_until_holding());
  auto waiting = make_request(2, "The cat", 5);
  waiting.timeout_s = 0.05;
  send(self, waiting);
  auto first = collect(self, 1);
  ASSERT_EQ(first[2].results.size(), 1u) << "request 2 did not end first";
  const auto& expired = first[2].results[0];
  EXPECT_EQ(expired.how, outcome::expired);
  EXPECT_EQ(expired.code, ec::expired);
  EXPECT_EQ(expired.message, "deadline passed while waiting in the queue");
  caf::anon_send(handle->front, atom::cancel::value, request_id{1});
  gate->open();
  auto rest = collect(self, 1);
  EXPECT_EQ(rest[1].results.at(0).how, outcome::cancelled);
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
  // Two executors of two slots each. The first is held (its clock stopped) once it takes work,
  // so whatever it cannot hold the batcher must place on the second, however fast either runs.
  auto gate = std::make_shared<clock_gate>();
  opens_at_exit opener{gate};
  std::vector<std::unique_ptr<pipeline::executor_core>> cores;
  cores.push_back(make_core("held", 2, gate));
  cores.push_back(make_core("free", 2));
  batcher_settings bs;
  bs.options.max_batch_size = 2;
  bs.options.max_num_seqs = 2;
  start_cores(std::move(cores), bs, false);
  // Only the held executor pulls: it takes two requests (its slots) and stops there.
  attach_executor(0);
  caf::scoped_actor self{sys};
  const request_id count = 16;
  for (request_id i = 1; i <= count; ++i) {
    auto r = make_request(i, mix[i % mix.size()].first, 40);
    r.params.ignore_eos = true;
    send(self, r);
  }
  pipeline_status st;
  ASSERT_TRUE(eventually([&] {
    st = status();
    return st.running == 2 && st.waiting == count - 2;
  })) << "running " << st.running << ", waiting " << st.waiting;
  // The second executor joins: all the others run there while the first still holds its two.
  attach_executor(1);
  auto on_second = collect(self, count - 2);
  std::set<request_id> ended;
  for (auto& [id, a] : on_second) {
    ASSERT_EQ(a.results.size(), 1u) << "request " << id;
    ended.insert(id);
    EXPECT_EQ(a.results[0].how, outcome::finished) << a.results[0].message;
    EXPECT_EQ(a.tokens.size(), 40u) << "request " << id;
  }
  EXPECT_EQ(ended.size(), size_t(count - 2));
  // The held executor's two still run (once the batcher has heard the others' ends).
  EXPECT_TRUE(eventually([&] {
    st = status();
    return st.running == 2 && st.waiting == 0;
  })) << "running " << st.running << ", waiting " << st.waiting;
  // Let the first go: it finishes the two it took.
  gate->open();
  auto on_first = collect(self, 2);
  for (auto& [id, a] : on_first) {
    EXPECT_EQ(ended.count(id), 0u) << "request " << id << " ended twice";
    ended.insert(id);
    ASSERT_EQ(a.results.size(), 1u) << "request " << id;
    EXPECT_EQ(a.results[0].how, outcome::finished) << a.results[0].message;
    EXPECT_EQ(a.tokens.size(), 40u) << "request " << id;
  }
  EXPECT_EQ(ended.size(), size_t(count));
}
