// `conveyor serve --threads N`: the same flag, meaning and check as generate's and bench's; the
// executors' start-up log line shows the threads they compute with.
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/apps/conveyor_process.hpp"

using namespace conveyor::app::test;

namespace {

/// Starts `serve` on a free port with `args`, waits until it is ready, and returns the number
/// of compute threads its executor cpu:0 logged ("" when it never got there: see the log).
std::string threads_of_serve(std::vector<std::string> args, std::string& log) {
  args.insert(args.begin(), {"serve", "--port", "0", "--log-level", "info"});
  background_conveyor serve{args};
  const auto ready = serve.wait_for("ready: model");
  log = serve.log();
  if (ready.empty()) return "";
  return serve.wait_for("executor cpu:0: (\\d+) compute threads");
}

}  // namespace

TEST(serve_command, threads_sets_the_compute_threads_of_each_executor) {
  std::string log;
  EXPECT_EQ(threads_of_serve({"--threads", "3"}, log), "3") << log;
}

TEST(serve_command, threads_overrides_the_configured_executor_threads) {
  std::string log;
  const std::vector<std::string> configured = {"--set", "executors=cpu", "--set",
                                               "executors[0].threads=1"};
  EXPECT_EQ(threads_of_serve(configured, log), "1") << log;
  auto with_flag = configured;
  with_flag.insert(with_flag.end(), {"--threads", "2"});
  EXPECT_EQ(threads_of_serve(with_flag, log), "2") << log;
  // 0 is every core, as in the configuration and for generate and bench.
  auto every_core = configured;
  every_core.insert(every_core.end(), {"--threads", "0"});
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_EQ(threads_of_serve(every_core, log), std::to_string(cores)) << log;
}

TEST(serve_command, threads_outside_0_to_1024_is_refused_naming_the_flag) {
  for (const char* bad : {"-1", "1025", "many"}) {
    auto r = run_conveyor(std::string{"serve --port 0 --threads "} + bad);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.err.find("--threads"), std::string::npos) << bad << ": " << r.err;
    EXPECT_EQ(r.err.find("ready"), std::string::npos) << bad << ": " << r.err;
  }
  // generate and bench check it the same way.
  for (const char* command : {"generate -p hi", "bench --rate 1 -n 1"}) {
    auto r = run_conveyor(std::string{command} + " --threads 1025");
    EXPECT_NE(r.exit_code, 0) << command;
    EXPECT_NE(r.err.find("--threads"), std::string::npos) << command << ": " << r.err;
  }
}
