// Several GPUs without a GPU: a faked device list places `executors = "auto"` on N "devices",
// each computing on the CPU; every executor pulls work and a greedy request gives the expected
// tokens whichever executor ran it. Also the start-up checks: invisible devices, small memory.
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "tests/support/model_files.hpp"
#include "actors/caf_error.hpp"
#include "actors/spawn.hpp"
#include "gpu/devices.hpp"
#include "gpu/placement.hpp"

using namespace conveyor;
using namespace std::chrono_literals;

namespace {

constexpr int64_t gib = int64_t{1} << 30;

gpu::listed_devices fake_gpus(size_t n, int64_t free_bytes = 80 * gib) {
  std::vector<gpu::device_info> ds;
  for (size_t i = 0; i < n; ++i)
    ds.push_back({0, "Fake GPU " + std::to_string(i), 80 * gib, free_bytes});
  return gpu::listed_devices{std::move(ds)};
}

/// Every "cuda:N" computes on the CPU; records which devices were mapped.
spawn_options on_the_cpu(const gpu::device_provider& devices, std::vector<std::string>* mapped) {
  spawn_options opt;
  opt.devices = &devices;
  opt.device_map = [mapped](const std::string& device) {
    mapped->push_back(device);
    return std::string{"cpu"};
  };
  return opt;
}

struct answer {
  std::vector<int32_t> tokens;
  std::vector<request_result> results;
};

class gpus_test : public ::testing::Test {
 protected:
  static caf::actor_system_config& init(caf::actor_system_config& cfg) {
    add_error_category(cfg);
    cfg.set("logger.verbosity", caf::atom("quiet"));
    return cfg;
  }

  void TearDown() override {
    if (handle) stop_pipeline(*handle);
  }

  // `executors = "auto"` (the default); each executor runs one sequence at a time, so that
  // queued requests spread over the executors.
  static config::pipeline auto_config() {
    config::pipeline cfg;
    cfg.batcher.max_num_seqs = 1;
    cfg.batcher.max_batch_size = 1;
    cfg.metrics.interval_s = 0;
    return cfg;
  }

  // Sends `count` greedy copies of the expected run's prompt and collects every answer.
  std::map<request_id, answer> run_round(request_id first, size_t count,
                                         const test::expected_run& expected) {
    caf::scoped_actor self{sys};
    for (request_id id = first; id < first + count; ++id) {
      generate_request r;
      r.id = id;
      r.prompt = "Once upon a time";
      r.params.max_tokens = int32_t(expected.generated().size());
      r.params.temperature = 0;
      caf::anon_send(handle->front, atom::generate::value, std::move(r),
                     caf::actor_cast<sink_actor>(self));
    }
    std::map<request_id, answer> out;
    size_t results = 0;
    bool timed_out = false;
    while (results < count && !timed_out) {
      self->receive(
          [&](token_chunk& c) {
            auto& a = out[c.id].tokens;
            a.insert(a.end(), c.tokens.begin(), c.tokens.end());
          },
          [&](request_result& r) {
            out[r.id].results.push_back(r);
            ++results;
          },
          caf::after(60s) >> [&] { timed_out = true; });
    }
    EXPECT_FALSE(timed_out) << "only " << results << " of " << count << " requests ended";
    return out;
  }

  // Rounds of `count` greedy requests (at most 20) until every executor of `names` made a step;
  // every answer must be the expected run. The executors that worked.
  std::set<std::string> rounds_until_each_worked(const std::vector<std::string>& names,
                                                 size_t count, const test::expected_run& expected) {
    request_id next = 1;
    std::set<std::string> worked;
    for (int round = 0; round < 20 && worked.size() < names.size(); ++round) {
      auto answers = run_round(next, count, expected);
      next += count;
      EXPECT_EQ(answers.size(), count);
      for (const auto& [id, a] : answers) {
        if (a.results.size() != 1u) {
          ADD_FAILURE() << "request " << id << " ended " << a.results.size() << " times";
          continue;
        }
        EXPECT_EQ(a.results[0].how, outcome::finished) << a.results[0].message;
        EXPECT_EQ(a.results[0].reason, finish_reason::length);
        EXPECT_EQ(a.tokens, expected.generated()) << "request " << id;
      }
      auto snapshot = nlohmann::json::parse(ask_metrics(atom::snapshot::value));
      for (const auto& name : names)
        if (snapshot["executors"].contains(name) && snapshot["executors"][name]["steps"] > 0)
          worked.insert(name);
    }
    return worked;
  }

  template <class Atom>
  std::string ask_metrics(Atom what) {
    caf::scoped_actor self{sys};
    std::string text;
    self->request(handle->metrics, 10s, what)
        .receive([&](std::string& s) { text = std::move(s); },
                 [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return text;
  }

  caf::actor_system_config cfg;
  caf::actor_system sys{init(cfg)};
  std::optional<pipeline_handle> handle;
};

TEST_F(gpus_test, auto_spawns_one_executor_per_device_and_each_gives_the_expected_tokens) {
  const auto expected = test::load_expected_run();
  ASSERT_FALSE(expected.generated().empty());
  auto devices = fake_gpus(3);
  std::vector<std::string> mapped;
  auto h = spawn_pipeline(sys, auto_config(), on_the_cpu(devices, &mapped));
  ASSERT_TRUE(h) << message_of(h.error());
  handle = std::move(*h);
  ASSERT_EQ(handle->executors.size(), 3u);
  EXPECT_EQ(mapped, (std::vector<std::string>{"cuda:0", "cuda:1", "cuda:2"}));
  const std::vector<std::string> names{"cuda:0:0", "cuda:1:1", "cuda:2:2"};
  // Rounds of six requests until the metrics show steps on every executor (the first round
  // normally does it: each executor takes one request at a time). Every answer of every round
  // must be the expected run, so it is whichever executor ran it.
  EXPECT_EQ(rounds_until_each_worked(names, 6, expected),
            (std::set<std::string>{names.begin(), names.end()}))
      << "not every executor pulled work";
  // /metrics names each executor's device.
  auto text = ask_metrics(atom::prometheus::value);
  for (int i = 0; i < 3; ++i) {
    const auto n = std::to_string(i);
    EXPECT_NE(text.find("conveyor_executor_info{executor=\"cuda:" + n + ":" + n +
                        "\",device=\"cuda:" + n + "\"} 1\n"),
              std::string::npos)
        << text;
  }
}

TEST_F(gpus_test, auto_without_devices_is_one_cpu_executor) {
  auto none = fake_gpus(0);
  std::vector<std::string> mapped;
  auto h = spawn_pipeline(sys, auto_config(), on_the_cpu(none, &mapped));
  ASSERT_TRUE(h) << message_of(h.error());
  handle = std::move(*h);
  EXPECT_EQ(handle->executors.size(), 1u);
  EXPECT_EQ(mapped, std::vector<std::string>{"cpu"});
}

TEST_F(gpus_test, a_device_that_is_not_visible_fails_the_start_naming_the_executor) {
  auto devices = fake_gpus(2);
  std::vector<std::string> mapped;
  auto cfg = auto_config();
  cfg.auto_executors = false;
  cfg.executors.resize(2);
  cfg.executors[0].device = "cuda:1";
  cfg.executors[1].device = "cuda:2";
  auto h = spawn_pipeline(sys, cfg, on_the_cpu(devices, &mapped));
  ASSERT_FALSE(h);
  EXPECT_EQ(message_of(h.error()),
            "executors[1]: device cuda:2 is not available: 2 CUDA device(s) visible (cuda:0 to "
            "cuda:1)");
  EXPECT_TRUE(mapped.empty()) << "no model was loaded";
}

TEST_F(gpus_test, cuda_without_a_visible_gpu_fails_the_start) {
  // The real devices: on this CPU build (or a machine without a GPU) there are none.
  if (gpu::visible_gpus() > 0) GTEST_SKIP() << "a GPU is visible";
  auto cfg = auto_config();
  cfg.auto_executors = false;
  cfg.executors.resize(1);
  cfg.executors[0].device = "cuda:0";
  auto h = spawn_pipeline(sys, cfg);
  ASSERT_FALSE(h);
  EXPECT_EQ(code_of(h.error()), ec::bad_config);
  EXPECT_EQ(message_of(h.error()), "executors[0]: device cuda:0 is not available: " +
                                       gpu::system_devices().none_visible_reason());
}

TEST_F(gpus_test, executors_that_do_not_fit_on_their_device_fail_the_start) {
  // 1 GiB free: one executor of the tiny model fits (its workspace margin is 512 MiB), two on
  // the same device do not.
  auto devices = fake_gpus(2, gib);
  std::vector<std::string> mapped;
  auto cfg = auto_config();
  cfg.auto_executors = false;
  cfg.executors.resize(3);
  cfg.executors[0].device = "cuda:1";
  cfg.executors[1].device = "cuda:0";
  cfg.executors[2].device = "cuda:1";
  auto h = spawn_pipeline(sys, cfg, on_the_cpu(devices, &mapped));
  ASSERT_FALSE(h);
  const auto text = message_of(h.error());
  EXPECT_EQ(text.rfind("cuda:1 (Fake GPU 1): needs ", 0), 0u) << text;
  EXPECT_NE(text.find(" for 2 executors), 1.0 GiB free"), std::string::npos) << text;
  EXPECT_EQ(text.find("cuda:0"), std::string::npos) << text;
  EXPECT_TRUE(mapped.empty()) << "no model was loaded";
}

TEST_F(gpus_test, two_executors_on_one_real_gpu_each_give_the_expected_tokens) {
  // The real devices: this runs where a GPU is visible (scripts/gpu-check.sh), else skips.
  if (gpu::visible_gpus() == 0) GTEST_SKIP() << gpu::system_devices().none_visible_reason();
  const auto expected = test::load_expected_run();
  auto cfg = auto_config();
  cfg.auto_executors = false;
  cfg.executors.resize(2);
  cfg.executors[0].device = "cuda:0";
  cfg.executors[1].device = "cuda:0";
  auto h = spawn_pipeline(sys, cfg);
  ASSERT_TRUE(h) << message_of(h.error());
  handle = std::move(*h);
  ASSERT_EQ(handle->executors.size(), 2u);
  const std::vector<std::string> names{"cuda:0:0", "cuda:0:1"};
  EXPECT_EQ(rounds_until_each_worked(names, 4, expected),
            (std::set<std::string>{names.begin(), names.end()}))
      << "not both executors pulled work";
}

}  // namespace
