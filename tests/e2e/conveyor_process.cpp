#include "tests/e2e/conveyor_process.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace conveyor::e2e {

namespace {

using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

std::string conveyor_program() {
  return CONVEYOR_BINARY_DIR "/apps/conveyor";
}

std::string expected_once_upon_a_time() {
  auto text =
      read_file(CONVEYOR_SOURCE_DIR "/models/stories260K/expected/greedy_once_upon_a_time_n64.txt");
  const std::string prompt = "Once upon a time";
  if (text.rfind(prompt, 0) != 0 || text.empty() || text.back() != '\n') return "<bad file>";
  return text.substr(prompt.size(), text.size() - prompt.size() - 1);
}

conveyor_process::conveyor_process(const std::vector<std::string>& args) {
  char path[] = "/tmp/conveyor-e2e-XXXXXX";
  const int log_fd = ::mkstemp(path);
  if (log_fd < 0) {
    error_ = "cannot create a log file in /tmp";
    return;
  }
  log_path_ = path;
  // Everything the child needs is built before fork: it may only call async-signal-safe
  // functions until exec.
  std::vector<std::string> words{conveyor_program(), "serve", "--host", "127.0.0.1", "--port", "0"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    error_ = "fork failed";
    return;
  }
  if (pid == 0) {
    // The server dies with the test program, even when that one crashes.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::chdir(CONVEYOR_SOURCE_DIR) != 0) ::_exit(127);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  pid_ = pid;
  const auto deadline = steady::now() + 60s;
  const std::regex listening{R"(listening on http://127\.0\.0\.1:(\d+))"};
  while (port_ == 0) {
    std::smatch m;
    const auto text = log();
    if (std::regex_search(text, m, listening)) {
      port_ = static_cast<uint16_t>(std::stoul(m[1].str()));
      break;
    }
    if (wait(10ms) != -1) {
      error_ = "conveyor serve exited with " + std::to_string(exit_code_) + " before listening:\n" +
               log();
      return;
    }
    if (steady::now() > deadline) {
      error_ = "conveyor serve did not log 'listening on' within 60 s:\n" + log();
      return;
    }
  }
  for (;;) {
    auto health = request("GET", "/health", "", 2s);
    if (health && health->status == 200) return;
    if (wait(10ms) != -1) {
      error_ =
          "conveyor serve exited with " + std::to_string(exit_code_) + " before ready:\n" + log();
      return;
    }
    if (steady::now() > deadline) {
      error_ = "GET /health did not answer 200 within 60 s:\n" + log();
      return;
    }
  }
}

conveyor_process::~conveyor_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (!log_path_.empty()) ::unlink(log_path_.c_str());
}

void conveyor_process::signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

int conveyor_process::wait(std::chrono::milliseconds timeout) {
  const auto deadline = steady::now() + timeout;
  while (pid_ > 0) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (r < 0 || steady::now() >= deadline) return -1;
    std::this_thread::sleep_for(5ms);
  }
  return exit_code_;
}

int conveyor_process::stop(std::chrono::milliseconds timeout) {
  signal(SIGTERM);
  const int code = wait(timeout);
  if (code == -1 && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  return code;
}

std::string conveyor_process::log() const {
  return read_file(log_path_);
}

std::optional<http_reply> conveyor_process::request(const std::string& method,
                                                    const std::string& target,
                                                    const std::string& body,
                                                    std::chrono::milliseconds timeout) {
  test_client client{port_};
  if (!client.connected() || !client.send_request(method, target, body)) return std::nullopt;
  return client.read_response(timeout);
}

std::string conveyor_process::metrics() {
  auto reply = request("GET", "/metrics");
  return reply && reply->status == 200 ? reply->body : std::string{};
}

double metric_value(const std::string& text, const std::string& name) {
  std::istringstream in{text};
  std::string line;
  while (std::getline(in, line))
    if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 &&
        line[name.size()] == ' ')
      return std::stod(line.substr(name.size() + 1));
  return -1;
}

std::string stream_text(const std::vector<nlohmann::json>& events) {
  std::string text;
  for (const auto& e : events)
    if (e.is_object() && e.contains("choices") && !e["choices"].empty())
      text += e["choices"][0]["text"].get<std::string>();
  return text;
}

std::vector<std::string> one_slot_args(std::vector<std::string> more) {
  std::vector<std::string> args{"--config", "tests/e2e/one_slot.toml"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::string stream_body(int max_tokens) {
  return nlohmann::json{{"prompt", "Once upon a time"},
                        {"max_tokens", max_tokens},
                        {"temperature", 0},
                        {"stream", true},
                        {"stream_options", {{"include_usage", true}}}}
      .dump();
}

std::unique_ptr<test_client> open_stream(uint16_t port, const std::string& body) {
  auto client = std::make_unique<test_client>(port);
  if (!client->connected() || !client->send_request("POST", "/v1/completions", body) ||
      !client->read_until("data: ", 30s))
    return nullptr;
  return client;
}

command_result run_shell(const std::string& command) {
  command_result result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return result;
  char chunk[4096];
  while (auto n = std::fread(chunk, 1, sizeof(chunk), pipe)) result.out.append(chunk, n);
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

}  // namespace conveyor::e2e
