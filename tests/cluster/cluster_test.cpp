// Scale-out end to end: `conveyor serve` with two `conveyor worker` processes on 127.0.0.1 gives
// the single-process answers; a worker killed mid-run ends its streaming requests once, as
// executor_lost, the survivor finishes the rest, and a restarted worker is attached again.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/server/test_client.hpp"

using namespace std::chrono_literals;
using conveyor::server::test::sse_events;
using conveyor::server::test::test_client;

namespace {

std::string temp_path(const std::string& name) {
  return std::string{CONVEYOR_BINARY_DIR} + "/cluster_test_" + std::to_string(::getpid()) + "_" +
         name;
}

std::string read_file(const std::string& path) {
  std::ifstream in{path};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// One `conveyor` process; killed (SIGKILL) and reaped when it goes out of scope, whatever the
/// test did. Its stderr (the log) goes to a file.
class child_process {
 public:
  child_process(std::string name, std::vector<std::string> args) : log_(temp_path(name + ".log")) {
    args.insert(args.begin(), CONVEYOR_EXE);
    pid_ = ::fork();
    if (pid_ == 0) {
      // Dies with the test program, even when that one crashes.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 2);
      ::dup2(fd, 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~child_process() { kill(SIGKILL); }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  void kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  std::string log() const { return read_file(log_); }

  /// Waits until the log matches `pattern`; returns its first group (or "" on timeout).
  std::string wait_for(const std::string& pattern, std::chrono::seconds timeout = 30s) const {
    const std::regex re{pattern};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      const auto text = log();
      if (std::regex_search(text, m, re)) return m.size() > 1 ? m[1].str() : m[0].str();
      std::this_thread::sleep_for(20ms);
    }
    return "";
  }

  /// How often `needle` occurs in the log.
  size_t count(const std::string& needle) const {
    const auto text = log();
    size_t n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
};

std::unique_ptr<child_process> start_worker(const std::string& name,
                                            const std::string& listen = "127.0.0.1:0") {
  return std::make_unique<child_process>(
      name, std::vector<std::string>{"worker", "--listen", listen, "--set", "executors=cpu",
                                     "--set", "executors[0].threads=1", "--set",
                                     "executors[0].slots=2", "--set", "metrics.interval_s=0"});
}

/// A server whose config file lists `remotes` and `local` local executors; returns its HTTP port.
std::unique_ptr<child_process> start_server(const std::string& name,
                                            const std::vector<std::string>& remotes, int local,
                                            uint16_t& port) {
  const auto config = temp_path(name + ".toml");
  {
    std::ofstream out{config};
    out << "executors = []\n";
    for (int i = 0; i < local; ++i) out << "[[executors]]\nthreads = 1\nslots = 2\n";
    out << "[cluster]\nremote = [";
    for (size_t i = 0; i < remotes.size(); ++i) out << (i ? ", " : "") << '"' << remotes[i] << '"';
    out << "]\n[metrics]\ninterval_s = 0\n";
  }
  auto server = std::make_unique<child_process>(
      name, std::vector<std::string>{"serve", "--config", config, "--port", "0"});
  port = uint16_t(std::stoi("0" + server->wait_for(R"(listening on http://127\.0\.0\.1:(\d+))")));
  return server;
}

const std::vector<std::string> prompts = {
    "Once upon a time", "The cat sat",      "Lily went to the park", "Tom had a red ball",
    "One day",          "The sun was warm", "A little bird",         "Max and his dog",
};

std::string body(const std::string& prompt, int max_tokens, bool stream) {
  return nlohmann::json{
      {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", stream}}
      .dump();
}

/// Sends every prompt at once on its own connection and returns each answer's text ("" on error).
std::vector<std::string> complete_all(uint16_t port, int max_tokens) {
  std::vector<std::unique_ptr<test_client>> clients;
  for (const auto& p : prompts) {
    clients.push_back(std::make_unique<test_client>(port));
    EXPECT_TRUE(
        clients.back()->send_request("POST", "/v1/completions", body(p, max_tokens, false)));
  }
  std::vector<std::string> texts;
  for (auto& c : clients) {
    auto reply = c->read_response(30s);
    EXPECT_TRUE(reply && reply->status == 200) << (reply ? reply->body : "no answer");
    texts.push_back(reply && reply->status == 200
                        ? reply->json()["choices"][0]["text"].get<std::string>()
                        : "");
  }
  return texts;
}

TEST(cluster, two_workers_give_the_single_process_answers) {
  uint16_t alone_port = 0;
  std::vector<std::string> expected;
  {
    child_process alone{"alone",
                        {"serve", "--port", "0", "--set", "executors=cpu", "--set",
                         "executors[0].threads=1", "--set", "metrics.interval_s=0"}};
    alone_port =
        uint16_t(std::stoi("0" + alone.wait_for(R"(listening on http://127\.0\.0\.1:(\d+))")));
    ASSERT_NE(alone_port, 0) << alone.log();
    expected = complete_all(alone_port, 48);
  }
  auto w1 = start_worker("a_w1");
  auto w2 = start_worker("a_w2");
  const auto p1 = w1->wait_for(R"(worker ready: .* at 127\.0\.0\.1:(\d+))");
  const auto p2 = w2->wait_for(R"(worker ready: .* at 127\.0\.0\.1:(\d+))");
  ASSERT_FALSE(p1.empty()) << w1->log();
  ASSERT_FALSE(p2.empty()) << w2->log();
  uint16_t port = 0;
  auto server = start_server("a_server", {"127.0.0.1:" + p1, "127.0.0.1:" + p2}, 0, port);
  ASSERT_NE(port, 0) << server->log();
  ASSERT_FALSE(server->wait_for("worker 127.0.0.1:" + p1 + ": connected").empty()) << server->log();
  ASSERT_FALSE(server->wait_for("worker 127.0.0.1:" + p2 + ": connected").empty()) << server->log();
  const auto got = complete_all(port, 48);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(got[i], expected[i]) << "prompt '" << prompts[i] << "'";
  // Both workers' executors were attached to the server's batcher. (Which of them ran which
  // request depends on their speed, so the test does not ask; tests/actors/pipeline_test's
  // two_executors_share_the_load shows the placement with a held executor.)
  EXPECT_GE(w1->count("attached to batcher"), 1u);
  EXPECT_GE(w2->count("attached to batcher"), 1u);
}

TEST(cluster, a_killed_worker_fails_only_what_it_streamed_and_comes_back) {
  auto w1 = start_worker("b_w1");
  auto w2 = start_worker("b_w2");
  const auto p1 = w1->wait_for(R"(worker ready: .* at 127\.0\.0\.1:(\d+))");
  const auto p2 = w2->wait_for(R"(worker ready: .* at 127\.0\.0\.1:(\d+))");
  ASSERT_FALSE(p1.empty() || p2.empty());
  uint16_t port = 0;
  auto server = start_server("b_server", {"127.0.0.1:" + p1, "127.0.0.1:" + p2}, 0, port);
  ASSERT_NE(port, 0) << server->log();
  ASSERT_FALSE(server->wait_for("worker 127.0.0.1:" + p1 + ": connected").empty());
  ASSERT_FALSE(server->wait_for("worker 127.0.0.1:" + p2 + ": connected").empty());
  // Two slots per worker: four requests run, the others wait in the server's queue.
  std::vector<std::unique_ptr<test_client>> clients;
  for (const auto& p : prompts) {
    clients.push_back(std::make_unique<test_client>(port));
    ASSERT_TRUE(clients.back()->send_request("POST", "/v1/completions", body(p, 200, true)));
  }
  // Kill worker 1 once tokens flow.
  ASSERT_TRUE(clients[0]->read_until("data: ", 20s));
  w1->kill(SIGKILL);
  size_t finished = 0;
  size_t lost = 0;
  for (auto& c : clients) {
    auto reply = c->read_response(60s);
    ASSERT_TRUE(reply) << "a request did not end";
    ASSERT_EQ(reply->status, 200u) << reply->body;
    const auto events = sse_events(reply->body);
    ASSERT_FALSE(events.empty());
    size_t ends = 0;
    for (const auto& e : events) {
      if (e.is_string()) continue;  // [DONE]
      if (e.contains("error")) {
        EXPECT_EQ(e["error"]["code"], "executor_lost") << e.dump();
        ++lost;
        ++ends;
      } else if (!e["choices"].empty() && !e["choices"][0]["finish_reason"].is_null()) {
        ++finished;
        ++ends;
      }
    }
    EXPECT_EQ(ends, 1u) << reply->body;
  }
  EXPECT_EQ(finished + lost, prompts.size());
  // At most what worker 1 ran (two slots) failed; everything else finished on the survivor.
  // (How many it was running when killed, 0 to 2, depends on speed.)
  EXPECT_LE(lost, 2u);
  EXPECT_FALSE(server->wait_for("worker 127.0.0.1:" + p1 + ": lost").empty()) << server->log();
  // The server keeps serving, and a worker that comes back on the same address pulls again.
  auto again = start_worker("b_w1_again", "127.0.0.1:" + p1);
  ASSERT_FALSE(again->wait_for(R"(worker ready: .* at 127\.0\.0\.1:(\d+))").empty())
      << again->log();
  // The server retries a lost worker with a back-off of up to 10 s.
  EXPECT_FALSE(again->wait_for("attached to batcher", 60s).empty()) << server->log();
  w2->kill(SIGKILL);
  test_client c{port};
  auto reply = c.request("POST", "/v1/completions", body("Once upon a time", 16, false));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200u) << reply->body;
}

}  // namespace

// An output format crosses to a remote worker with its request (uncompiled: the worker's executor
// compiles it on arrival) and gives what the server alone gives.
TEST(cluster, an_output_format_travels_with_its_request_to_a_worker) {
  const std::string pattern = "(Tom|Lily) (is|was) [0-9]{1,2} years old\\.";
  auto constrained = [&](uint16_t port) {
    std::vector<std::string> texts;
    for (uint64_t seed = 0; seed < 6; ++seed) {
      test_client c{port};
      EXPECT_TRUE(c.send_request("POST", "/v1/completions",
                                 nlohmann::json{{"prompt", "Once upon a time"},
                                                {"max_tokens", 40},
                                                {"temperature", 1},
                                                {"seed", seed},
                                                {"structured_outputs", {{"regex", pattern}}}}
                                     .dump()));
      auto reply = c.read_response(30s);
      EXPECT_TRUE(reply && reply->status == 200) << (reply ? reply->body : "no answer");
      texts.push_back(reply && reply->status == 200
                          ? reply->json()["choices"][0]["text"].get<std::string>()
                          : "");
    }
    return texts;
  };
  std::vector<std::string> expected;
  {
    child_process alone{"f_alone",
                        {"serve", "--port", "0", "--set", "executors=cpu", "--set",
                         "executors[0].threads=1", "--set", "metrics.interval_s=0"}};
    const auto port =
        uint16_t(std::stoi("0" + alone.wait_for(R"(listening on http://127\.0\.0\.1:(\d+))")));
    ASSERT_NE(port, 0) << alone.log();
    expected = constrained(port);
  }
  auto w = start_worker("f_w");
  const auto p = w->wait_for(R"(worker ready: .* at 127\.0\.0\.1:(\d+))");
  ASSERT_FALSE(p.empty()) << w->log();
  uint16_t port = 0;
  auto server = start_server("f_server", {"127.0.0.1:" + p}, 0, port);
  ASSERT_NE(port, 0) << server->log();
  ASSERT_FALSE(server->wait_for("worker 127.0.0.1:" + p + ": connected").empty()) << server->log();
  const auto got = constrained(port);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(std::regex_match(got[i], std::regex{pattern})) << got[i];
    EXPECT_EQ(got[i], expected[i]) << "seed " << i;
  }
}
