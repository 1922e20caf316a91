// Runs the real `conveyor` program for tests/apps: to completion (exit code, stdout, stderr),
// or in the background with its log in a file (for `serve`).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace conveyor::app::test {

/// How a finished run went.
struct run_result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A fresh path in the build tree for this test process: ".../apps_test_PID_N" + `suffix`.
inline std::string temp_path(const std::string& suffix) {
  static int counter = 0;
  return std::string{CONVEYOR_BINARY_DIR} + "/apps_test_" + std::to_string(::getpid()) + "_" +
         std::to_string(counter++) + suffix;
}

/// Runs the conveyor binary with `args` (a shell-quoted string), capturing stdout and stderr.
inline run_result run_conveyor(const std::string& args) {
  const std::string base = temp_path("");
  const std::string command = std::string{CONVEYOR_BINARY_DIR} + "/apps/conveyor " + args + " >" +
                              base + ".out 2>" + base + ".err </dev/null";
  run_result r;
  const int status = std::system(command.c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(base + ".out");
  r.err = read_file(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

inline std::string source(const std::string& relative) {
  return std::string{CONVEYOR_SOURCE_DIR} + "/" + relative;
}

/// One `conveyor` process in the background, stdout and stderr in a log file; killed (SIGKILL)
/// and reaped when it goes out of scope, whatever the test did.
class background_conveyor {
 public:
  explicit background_conveyor(std::vector<std::string> args) : log_(temp_path(".log")) {
    args.insert(args.begin(), std::string{CONVEYOR_BINARY_DIR} + "/apps/conveyor");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the test program
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
  ~background_conveyor() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::remove(log_.c_str());
  }
  background_conveyor(const background_conveyor&) = delete;
  background_conveyor& operator=(const background_conveyor&) = delete;

  std::string log() const { return read_file(log_); }

  /// Waits until the log matches `pattern` or the process exits; returns the match's first
  /// group (the whole match without groups), or "" when it never matched (up to 60 s).
  std::string wait_for(const std::string& pattern) {
    const std::regex re{pattern};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      const bool exited = pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == pid_;
      if (exited) pid_ = -1;
      std::smatch m;
      const auto text = log();
      if (std::regex_search(text, m, re)) return m.size() > 1 ? m[1].str() : m[0].str();
      if (pid_ <= 0 || std::chrono::steady_clock::now() > deadline) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
};

}  // namespace conveyor::app::test
