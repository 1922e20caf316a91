// conveyor bench: replays a workload in open loop against in-process pipelines (one per batching
// policy) or an OpenAI-style server, and reports latencies and throughput; chat workloads
// (conversations, a shared system prompt) against a server, with TTFT by turn and the prefix
// cache's hit rate.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/caf_error.hpp"
#include "actors/spawn.hpp"
#include "apps/conveyor/commands.hpp"
#include "apps/conveyor/config_flags.hpp"
#include "bench/chat_target.hpp"
#include "bench/chat_workload.hpp"
#include "bench/http_target.hpp"
#include "bench/in_process.hpp"
#include "bench/output_formats.hpp"
#include "bench/report.hpp"
#include "bench/stats.hpp"
#include "bench/workload.hpp"

namespace conveyor::app {

namespace {

using namespace conveyor::bench;

/// What a workload is made of: completions requests, or chat conversations (several turns, or one
/// turn each after a shared system prompt).
constexpr const char* kinds[] = {"completions", "conversations", "shared-prefix"};

struct bench_options {
  config_flags flags;
  std::string kind = "completions";
  std::string workload_file;
  std::string policies = "sequential,seed,continuous";
  std::string target;
  int32_t client_threads = 0;
  std::string json_file;
  std::string plot_file;
  std::string rates;
  std::size_t requests = 100;
  uint64_t seed = 0;
  std::string prompt_words = "3,40";
  std::string max_tokens = "16,256";
  // Chat workloads.
  std::size_t conversations = 32;
  std::size_t turns = 4;
  int32_t system_tokens = 400;
  bool distinct_system = false;
  std::string user_words = "8,24";
  int32_t reply_tokens = 64;
  double think_time_s = 0;
  /// Flags given that only some kinds take, with those kinds (checked by run_bench).
  std::vector<std::pair<const CLI::Option*, std::vector<std::string>>> kind_flags;
  std::string save_file;
  bool run_too = false;
  sampling_fields sampling;
  output_formats formats;
  bool quiet = false;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "conveyor bench: %s\n", message.c_str());
  return 1;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in{text};
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

/// "A,B" as two integers; false when malformed.
bool parse_range(const std::string& text, int32_t& lo, int32_t& hi) {
  auto parts = split_commas(text);
  if (parts.size() != 2) return false;
  try {
    lo = std::stoi(parts[0]);
    hi = std::stoi(parts[1]);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

std::string rate_text(double rate) {
  if (std::isinf(rate)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", rate);
  return buf;
}

// -- progress ------------------------------------------------------------------------------------

/// Prints "sent / ended" on stderr every second while a run goes on.
class progress_printer {
 public:
  progress_printer(std::string label, std::size_t total, const run_progress& progress, bool quiet)
      : label_(std::move(label)), total_(total), progress_(progress) {
    if (quiet) return;
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> guard{mutex_};
      while (!stop_) {
        if (cv_.wait_for(guard, std::chrono::seconds(1), [this] { return stop_; })) break;
        std::fprintf(stderr, "bench %s: sent %zu/%zu, ended %zu\n", label_.c_str(),
                     progress_.sent.load(), total_, progress_.ended.load());
      }
    });
  }

  ~progress_printer() {
    {
      std::lock_guard<std::mutex> guard{mutex_};
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::string label_;
  std::size_t total_;
  const run_progress& progress_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

/// Says on stderr why the first request that did not complete ended so, and how many did not.
void report_first_problem(const std::vector<request_record>& records) {
  std::size_t not_completed = 0;
  const request_record* first = nullptr;
  for (const auto& r : records)
    if (r.status != request_status::completed) {
      ++not_completed;
      if (!first) first = &r;
    }
  if (first)
    std::fprintf(stderr, "bench: %zu of %zu requests did not complete; the first %s: %s\n",
                 not_completed, records.size(), to_string(first->status), first->message.c_str());
}

// -- the command ---------------------------------------------------------------------------------

/// One workload to run: completions requests, or conversations for the chat kinds.
struct bench_workload {
  /// The mean arrival rate (of conversations for chat), or the --rate it was made with.
  double rate = 0;
  workload requests;
  chat_workload conversations;
  bool chat = false;

  /// Requests to send: the completions, or the turns of every conversation.
  std::size_t size() const { return chat ? turns_of(conversations) : requests.size(); }
};

expected<std::vector<double>> parse_rates(const std::string& rates) {
  std::vector<double> out;
  for (const auto& text : split_commas(rates)) {
    try {
      out.push_back(text == "inf" ? std::numeric_limits<double>::infinity() : std::stod(text));
    } catch (const std::exception&) {
      return make_error(ec::bad_request, "--rate " + text + ": not a number");
    }
  }
  return out;
}

/// The chat workloads of --kind conversations or shared-prefix, one per rate.
expected<std::vector<bench_workload>> make_chat_workloads(const bench_options& o) {
  chat_workload_spec spec;
  spec.seed = o.seed;
  const bool shared_prefix = o.kind == "shared-prefix";
  spec.conversations = shared_prefix ? o.requests : o.conversations;
  spec.turns = shared_prefix ? 1 : o.turns;
  spec.system_tokens = o.system_tokens;
  spec.distinct_system = o.distinct_system;
  spec.max_tokens = o.reply_tokens;
  if (!parse_range(o.user_words, spec.min_user_words, spec.max_user_words))
    return make_error(ec::bad_request, "--user-words " + o.user_words + ": expected A,B");
  auto rates = parse_rates(o.rates);
  if (!rates) return rates.error();
  std::vector<bench_workload> out;
  for (double rate : *rates) {
    spec.rate = rate;
    if (auto err = validate(spec)) return err;
    bench_workload w;
    w.rate = rate;
    w.chat = true;
    w.conversations = generate_chat_workload(spec);
    out.push_back(std::move(w));
  }
  return out;
}

/// The workloads to run: the file, or one generated per rate.
expected<std::vector<bench_workload>> make_workloads(const bench_options& o) {
  const bool chat = o.kind != "completions";
  std::vector<bench_workload> out;
  if (!o.workload_file.empty()) {
    if (!o.rates.empty()) return make_error(ec::bad_request, "give --workload or --rate, not both");
    bench_workload w;
    w.chat = chat;
    if (chat) {
      auto c = load_chat_workload(o.workload_file);
      if (!c) return c.error();
      w.rate = rate_of(*c);
      w.conversations = std::move(*c);
    } else {
      auto r = load_workload(o.workload_file);
      if (!r) return r.error();
      w.rate = rate_of(*r);
      w.requests = std::move(*r);
    }
    out.push_back(std::move(w));
    return out;
  }
  if (o.rates.empty())
    return make_error(ec::bad_request, "give --workload FILE.jsonl or --rate R to make one");
  if (chat) return make_chat_workloads(o);
  workload_spec spec;
  spec.requests = o.requests;
  spec.seed = o.seed;
  if (!parse_range(o.prompt_words, spec.min_words, spec.max_words))
    return make_error(ec::bad_request, "--prompt-words " + o.prompt_words + ": expected A,B");
  if (!parse_range(o.max_tokens, spec.min_tokens, spec.max_tokens))
    return make_error(ec::bad_request, "--max-tokens " + o.max_tokens + ": expected A,B");
  auto rates = parse_rates(o.rates);
  if (!rates) return rates.error();
  for (double rate : *rates) {
    spec.rate = rate;
    if (auto err = validate(spec)) return err;
    bench_workload w;
    w.rate = rate;
    w.requests = generate_workload(spec);
    out.push_back(std::move(w));
  }
  return out;
}

/// FILE.jsonl for one workload, FILE-rR.jsonl for each of several.
std::string save_path(const std::string& file, double rate, bool several) {
  if (!several) return file;
  auto dot = file.rfind('.');
  const std::string suffix = "-r" + rate_text(rate);
  if (dot == std::string::npos || dot < file.find_last_of('/') + 1) return file + suffix;
  return file.substr(0, dot) + suffix + file.substr(dot);
}

error write_file(const std::string& path, const std::string& text) {
  std::ofstream out{path};
  if (!out) return make_error(ec::bad_file, path + ": cannot write");
  out << text;
  if (!out) return make_error(ec::bad_file, path + ": write failed");
  return {};
}

int run_bench(const bench_options& o) {
  if (std::find(std::begin(kinds), std::end(kinds), o.kind) == std::end(kinds))
    return fail("--kind: unknown kind '" + o.kind +
                "' (completions, conversations, shared-prefix)");
  for (const auto& [option, allowed] : o.kind_flags)
    if (option->count() > 0 && std::find(allowed.begin(), allowed.end(), o.kind) == allowed.end()) {
      std::string with;
      for (const auto& k : allowed) with += (with.empty() ? "" : " or ") + ("--kind " + k);
      return fail(option->get_name() + " goes with " + with);
    }
  const bool chat = o.kind != "completions";
  const bool will_run = o.save_file.empty() || o.run_too;
  if (chat && o.target.empty() && will_run)
    return fail("--kind " + o.kind +
                " runs against a server through /v1/chat/completions: give --target URL (for "
                "Conveyor, `conveyor serve` on another port)");
  if (auto problem = check(o.sampling)) return fail(*problem);
  if (auto problem = check(o.formats)) return fail(*problem);
  if (o.client_threads != 0 && o.target.empty())
    return fail("--client-threads goes with --target (the client's threads)");
  if (o.run_too && o.save_file.empty())
    return fail("--run goes with --save (without it, bench runs)");
  if (!o.save_file.empty() && !o.workload_file.empty())
    return fail("--save writes a made workload (--rate), not one read with --workload");
  auto workloads = make_workloads(o);
  if (!workloads) return fail(message_of(workloads.error()));
  if (!o.save_file.empty()) {
    for (const auto& w : *workloads) {
      const auto path = save_path(o.save_file, w.rate, workloads->size() > 1);
      if (auto err =
              w.chat ? save_chat_workload(w.conversations, path) : save_workload(w.requests, path))
        return fail(message_of(err));
      if (w.chat)
        std::fprintf(stderr, "bench: wrote %zu conversations (%zu turns) to %s\n",
                     w.conversations.size(), w.size(), path.c_str());
      else
        std::fprintf(stderr, "bench: wrote %zu requests to %s\n", w.size(), path.c_str());
    }
    if (!o.run_too) return 0;
  }
  nlohmann::json settings;
  settings["workload"] =
      o.workload_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.workload_file);
  settings["kind"] = o.kind;
  if (o.workload_file.empty() && !chat)
    settings["generated"] = {{"rates", o.rates},
                             {"requests", o.requests},
                             {"seed", o.seed},
                             {"prompt_words", o.prompt_words},
                             {"max_tokens", o.max_tokens}};
  if (o.workload_file.empty() && chat) {
    const bool shared_prefix = o.kind == "shared-prefix";
    settings["generated"] = {{"rates", o.rates},
                             {"conversations", shared_prefix ? o.requests : o.conversations},
                             {"turns", shared_prefix ? std::size_t{1} : o.turns},
                             {"seed", o.seed},
                             {"system_tokens", o.system_tokens},
                             {"distinct_system", o.distinct_system},
                             {"user_words", o.user_words},
                             {"reply_tokens", o.reply_tokens}};
  }
  if (chat) settings["think_time_s"] = o.think_time_s;
  settings["sampling"] = to_json(o.sampling);
  settings["output_formats"] = to_json(o.formats);
  std::vector<run_summary> runs;
  if (!o.target.empty()) {
    auto url = parse_target_url(o.target);
    if (!url) return fail(message_of(url.error()));
    target_options to;
    to.url = *url;
    to.model = o.flags.model;
    to.sampling = o.sampling;
    to.formats = o.formats;
    to.client_threads = o.client_threads;
    settings["target"] = o.target;
    settings["client_threads"] = o.client_threads;
    settings["model"] = o.flags.model;
    for (const auto& w : *workloads) {
      run_progress progress;
      run_timing timing;
      std::vector<request_record> records;
      {
        progress_printer printer{o.target + " @ " + rate_text(w.rate) + "/s", w.size(), progress,
                                 o.quiet};
        records = w.chat ? run_chat_target(w.conversations, to, o.think_time_s, progress, timing)
                         : run_target(w.requests, to, progress, timing);
      }
      runs.push_back(summarize(o.target, w.rate, records, timing.wall_s));
      report_first_problem(records);
      runs.back().process_cpu_s = timing.cpu_s;
    }
  } else {
    auto cfg = o.flags.load();
    if (!cfg) return fail(message_of(cfg.error()));
    auto policies = split_commas(o.policies);
    if (policies.empty()) return fail("--policies: give at least one");
    for (const auto& p : policies)
      if (p != "sequential" && p != "seed" && p != "continuous")
        return fail("--policies: unknown policy '" + p + "' (sequential, seed, continuous)");
    setup_logging(cfg->log.level == "info" ? "warn" : cfg->log.level);
    settings["model"] = cfg->model.path;
    settings["policies"] = policies;
    caf::actor_system_config sys_cfg;
    configure_local_actor_system(sys_cfg);
    caf::actor_system system{sys_cfg};
    for (const auto& w : *workloads)
      for (const auto& policy : policies) {
        run_progress progress;
        progress_printer printer{policy + " @ " + rate_text(w.rate) + "/s", w.size(), progress,
                                 o.quiet};
        auto summary = run_in_process(system, *cfg, policy, w.requests, w.rate, progress,
                                      o.sampling, o.formats);
        if (!summary) return fail(policy + ": " + message_of(summary.error()));
        runs.push_back(std::move(*summary));
      }
  }
  std::fputs(render_table(runs).c_str(), stdout);
  std::fflush(stdout);
  if (!o.json_file.empty())
    if (auto err = write_file(o.json_file, to_json(runs, settings).dump(2) + "\n"))
      return fail(message_of(err));
  if (!o.plot_file.empty()) {
    const std::string what = o.workload_file.empty() ? "generated workload" : o.workload_file;
    if (auto err = write_file(o.plot_file, render_cdf_svg(runs, "E2E latency CDF: " + what)))
      return fail(message_of(err));
    if (workloads->size() > 1) {
      auto path = o.plot_file;
      if (path.size() > 4 && path.compare(path.size() - 4, 4, ".svg") == 0)
        path.resize(path.size() - 4);
      path += "-vs-rate.svg";
      if (auto err = write_file(path, render_rate_svg(runs, "E2E latency against arrival rate")))
        return fail(message_of(err));
      std::fprintf(stderr, "bench: wrote %s\n", path.c_str());
    }
  }
  return 0;
}

}  // namespace

command_fn add_bench(CLI::App& app) {
  auto o = std::make_shared<bench_options>();
  auto* cmd = app.add_subcommand(
      "bench",
      "Replay a workload in open loop (each request leaves at its arrival time) against "
      "in-process pipelines, one per batching policy, or an OpenAI-style server; print "
      "latencies and throughput");
  o->flags.add_to(*cmd, false);
  cmd->add_option("--kind", o->kind,
                  "What the workload is: completions (POST /v1/completions or in process), "
                  "conversations (multi-turn chat, each turn with the replies so far) or "
                  "shared-prefix (single-turn chat requests after one long system prompt); the "
                  "chat kinds need --target")
      ->capture_default_str();
  cmd->add_option("--workload,-w", o->workload_file,
                  "A JSONL workload (id, arrival_s, prompt, max_tokens per line; chat kinds: id, "
                  "arrival_s, system_prompt, user_messages, max_tokens)");
  cmd->add_option("--policies", o->policies, "Batching policies to compare, comma-separated")
      ->capture_default_str();
  cmd->add_option("--target", o->target,
                  "Bench an OpenAI-style server at http://HOST:PORT instead (POST "
                  "/v1/completions, or /v1/chat/completions for the chat kinds, with stream: "
                  "true); --model then names the model field");
  cmd->add_option("--client-threads", o->client_threads,
                  "With --target: event-loop threads of the client (0: one per core, at most "
                  "4); 1 leaves the other cores to a server on the same machine")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  cmd->add_option("--json", o->json_file, "Write the results as JSON to FILE");
  cmd->add_option("--plot", o->plot_file,
                  "Write an SVG chart of the E2E latency CDF to FILE.svg (with several rates "
                  "also FILE-vs-rate.svg)");
  o->flags.add_threads_to(*cmd);
  cmd->add_option("--rate", o->rates,
                  "Make a workload instead: Poisson arrivals at R requests/s (inf: all at 0); "
                  "R1,R2,... makes one per rate");
  auto* requests = cmd->add_option("--requests,-n", o->requests,
                                   "Requests of a made workload (completions, shared-prefix)")
                       ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24))
                       ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of a made workload")->capture_default_str();
  auto* prompt_words = cmd->add_option("--prompt-words", o->prompt_words,
                                       "Prompt words of a made workload, uniform in A,B")
                           ->capture_default_str();
  auto* max_tokens = cmd->add_option("--max-tokens", o->max_tokens,
                                     "max_tokens of a made workload, log-uniform in A,B")
                         ->capture_default_str();
  // Made chat workloads (--kind conversations, shared-prefix).
  auto* conversations =
      cmd->add_option("--conversations", o->conversations,
                      "Conversations of a made conversations workload (--rate: their arrivals)")
          ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
          ->capture_default_str();
  auto* turns = cmd->add_option("--turns", o->turns, "Turns (user messages) of each conversation")
                    ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 10))
                    ->capture_default_str();
  auto* system_tokens = cmd->add_option("--system-tokens", o->system_tokens,
                                        "System prompt of a made chat workload: about this many "
                                        "tokens of synthetic text (0: no system message)")
                            ->check(CLI::Range(0, 1 << 20))
                            ->capture_default_str();
  auto* distinct_system = cmd->add_flag("--distinct-system", o->distinct_system,
                                        "Each conversation its own system prompt (default: all "
                                        "share one)");
  auto* user_words = cmd->add_option("--user-words", o->user_words,
                                     "Words of each user message of a made chat workload, "
                                     "uniform in A,B")
                         ->capture_default_str();
  auto* reply_tokens =
      cmd->add_option("--reply-tokens", o->reply_tokens, "max_tokens of every chat turn")
          ->check(CLI::Range(1, 1 << 30))
          ->capture_default_str();
  auto* think_time = cmd->add_option("--think-time", o->think_time_s,
                                     "Seconds between a reply and the conversation's next turn")
                         ->check(CLI::Range(0.0, 3600.0))
                         ->capture_default_str();
  const std::vector<std::string> chat_kinds = {"conversations", "shared-prefix"};
  o->kind_flags = {{requests, {"completions", "shared-prefix"}},
                   {prompt_words, {"completions"}},
                   {max_tokens, {"completions"}},
                   {conversations, {"conversations"}},
                   {turns, {"conversations"}},
                   {think_time, {"conversations"}},
                   {system_tokens, chat_kinds},
                   {distinct_system, chat_kinds},
                   {user_words, chat_kinds},
                   {reply_tokens, chat_kinds}};
  cmd->add_option("--save", o->save_file,
                  "Write the made workload to FILE.jsonl (several rates: FILE-rR.jsonl) and "
                  "stop, unless --run");
  cmd->add_flag("--run", o->run_too, "With --save: also run the saved workload");
  // Each request's sampling fields; their limits (a request's, as the server's) are checked by
  // run_bench, naming the flag.
  cmd->add_option("--temperature", o->sampling.temperature,
                  "Temperature of every request, in [0, 2]; 0 is greedy (default: the "
                  "configuration's in process; 1 sent to a --target)");
  cmd->add_option("--top-p", o->sampling.top_p,
                  "top_p of every request, in (0, 1] (default: the configuration's in process; "
                  "not sent to a --target)");
  cmd->add_option("--top-k", o->sampling.top_k,
                  "top_k of every request, 0 keeps all (default: the configuration's in "
                  "process; not sent to a --target)");
  cmd->add_flag("--ignore-eos", o->sampling.ignore_eos,
                "Every request generates exactly its max_tokens (sent as \"ignore_eos\": true; "
                "synthetic models always do in process)");
  auto* json_schema_fraction =
      cmd->add_option("--json-schema-fraction", o->formats.json_schema_fraction,
                      "Share of the requests, spread evenly, that ask for a fixed JSON schema "
                      "(response_format; docs/bench.md); the table then shows their TPOT and "
                      "the others' apart")
          ->capture_default_str();
  o->kind_flags.push_back({json_schema_fraction, {"completions"}});
  cmd->add_flag("--quiet,-q", o->quiet, "No progress lines on stderr");
  return [o] { return run_bench(*o); };
}

}  // namespace conveyor::app
