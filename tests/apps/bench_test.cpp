// The real `conveyor bench`: the sampling fields it sends (captured by a server on a real
// socket), their limits named by flag, --save with or without --run, and the chat workloads
// (conversations against the real server, shared-prefix against a canned one).
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/chat_workload.hpp"
#include "bench/workload.hpp"
#include "tests/apps/conveyor_process.hpp"
#include "tests/bench/canned_server.hpp"

using namespace conveyor::app::test;
using conveyor::bench::test::canned_server;
using nlohmann::json;

namespace {

/// The made workload every test here asks for, as flags and as the spec they mean.
const std::string made = "--rate inf --requests 3 --seed 7 --prompt-words 2,4 --max-tokens 2,5 -q";

conveyor::bench::workload made_workload() {
  conveyor::bench::workload_spec spec;
  spec.rate = std::numeric_limits<double>::infinity();
  spec.requests = 3;
  spec.seed = 7;
  spec.min_words = 2;
  spec.max_words = 4;
  spec.min_tokens = 2;
  spec.max_tokens = 5;
  return conveyor::bench::generate_workload(spec);
}

std::vector<json> parsed(const std::vector<std::string>& bodies) {
  std::vector<json> out;
  for (const auto& b : bodies) out.push_back(json::parse(b));
  return out;
}

/// The (prompt, max_tokens) of each body, sorted: a burst arrives in any order.
std::vector<std::pair<std::string, int>> requests_of(const std::vector<json>& bodies) {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& b : bodies) out.emplace_back(b.at("prompt"), b.at("max_tokens"));
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<std::string, int>> requests_of(const conveyor::bench::workload& w) {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& r : w) out.emplace_back(r.prompt, r.max_tokens);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(bench_command, sends_the_sampling_flags_in_every_request_body) {
  canned_server server;
  auto r = run_conveyor("bench " + made + " --target " + server.url() +
                        " --model m1 --temperature 0 --top-p 0.9 --top-k 40 --ignore-eos");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("completed"), std::string::npos) << r.out;
  const auto bodies = parsed(server.bodies());
  ASSERT_EQ(bodies.size(), 3u);
  EXPECT_EQ(requests_of(bodies), requests_of(made_workload()));
  for (const auto& b : bodies) {
    EXPECT_EQ(b.at("temperature"), json(0.0)) << b;
    EXPECT_EQ(b.at("top_p"), json(0.9)) << b;
    EXPECT_EQ(b.at("top_k"), json(40)) << b;
    EXPECT_EQ(b.at("ignore_eos"), json(true)) << b;
    EXPECT_EQ(b.at("model"), json("m1")) << b;
    EXPECT_EQ(b.at("stream"), json(true)) << b;
  }
}

TEST(bench_command, leaves_out_the_flags_not_given_but_temperature_1) {
  canned_server server;
  auto r = run_conveyor("bench " + made + " --target " + server.url());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto bodies = parsed(server.bodies());
  ASSERT_EQ(bodies.size(), 3u);
  for (const auto& b : bodies) {
    // The bench's default since it was written (OpenAI's too): sent, so peers sample alike.
    EXPECT_EQ(b.at("temperature"), json(1.0)) << b;
    for (const char* absent : {"top_p", "top_k", "ignore_eos", "model", "seed"})
      EXPECT_FALSE(b.contains(absent)) << absent << " in " << b;
  }
}

TEST(bench_command, refuses_sampling_values_outside_a_requests_limits_naming_the_flag) {
  canned_server server;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--temperature 2.5", "--temperature: must be between 0 and 2, got 2.5"},
      {"--temperature -0.5", "--temperature: must be between 0 and 2, got -0.5"},
      {"--top-p 0", "--top-p: must be greater than 0 and at most 1, got 0"},
      {"--top-p 1.01", "--top-p: must be greater than 0 and at most 1, got 1.01"},
      {"--top-k -1", "--top-k: must be at least 0, got -1"},
  };
  for (const auto& [flags, message] : cases) {
    auto r = run_conveyor("bench " + made + " --target " + server.url() + " " + flags);
    EXPECT_EQ(r.exit_code, 1) << flags;
    EXPECT_EQ(r.err, "conveyor bench: " + message + "\n") << flags;
    EXPECT_EQ(r.out, "") << flags;
  }
  // Not a number: CLI11 names the flag.
  auto word = run_conveyor("bench " + made + " --target " + server.url() + " --top-k many");
  EXPECT_NE(word.exit_code, 0);
  EXPECT_NE(word.err.find("--top-k"), std::string::npos) << word.err;
  // In process too, before any model loads.
  auto local = run_conveyor("bench " + made + " --policies continuous --temperature 3");
  EXPECT_EQ(local.exit_code, 1);
  EXPECT_EQ(local.err, "conveyor bench: --temperature: must be between 0 and 2, got 3\n");
  EXPECT_TRUE(server.bodies().empty()) << "nothing was sent";
}

TEST(bench_command, ignore_eos_makes_every_request_of_a_real_model_generate_max_tokens) {
  // stories260K ends most greedy stories well before 300 tokens; with --ignore-eos each of the
  // 2 requests runs to its max_tokens (300), in process as through HTTP.
  const std::string json_path = temp_path(".json");
  const std::string flags =
      "bench --rate inf --requests 2 --seed 1 --prompt-words 3,3 --max-tokens 300,300 -q "
      "--policies continuous --threads 1 --temperature 0 --json " +
      json_path;
  auto tokens = [&](const std::string& extra) {
    auto r = run_conveyor(flags + extra);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = json::parse(read_file(json_path));
    std::remove(json_path.c_str());
    return j.at("runs").at(0).at("output_tokens").get<int>();
  };
  EXPECT_LT(tokens(""), 600);
  EXPECT_EQ(tokens(" --ignore-eos"), 600);
}

TEST(bench_command, save_writes_the_made_workload_and_stops) {
  canned_server server;
  const std::string path = temp_path(".jsonl");
  auto r = run_conveyor("bench " + made + " --target " + server.url() + " --save " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "") << "no report";
  EXPECT_NE(r.err.find("bench: wrote 3 requests to " + path), std::string::npos) << r.err;
  auto loaded = conveyor::bench::load_workload(path);
  ASSERT_TRUE(loaded);
  const auto expected = made_workload();
  ASSERT_EQ(loaded->size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ((*loaded)[i].id, expected[i].id);
    EXPECT_EQ((*loaded)[i].arrival_s, expected[i].arrival_s);
    EXPECT_EQ((*loaded)[i].prompt, expected[i].prompt);
    EXPECT_EQ((*loaded)[i].max_tokens, expected[i].max_tokens);
  }
  EXPECT_TRUE(server.bodies().empty()) << "no request was sent";
  std::remove(path.c_str());
}

TEST(bench_command, save_with_run_also_runs_the_saved_workload) {
  canned_server server;
  const std::string path = temp_path(".jsonl");
  auto r =
      run_conveyor("bench " + made + " --target " + server.url() + " --save " + path + " --run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("completed"), std::string::npos) << r.out;
  auto loaded = conveyor::bench::load_workload(path);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(requests_of(parsed(server.bodies())), requests_of(*loaded));
  std::remove(path.c_str());
}

TEST(bench_command, save_and_run_refuse_what_they_cannot_mean) {
  auto run_alone = run_conveyor("bench " + made + " --run");
  EXPECT_EQ(run_alone.exit_code, 1);
  EXPECT_EQ(run_alone.err, "conveyor bench: --run goes with --save (without it, bench runs)\n");
  auto file = run_conveyor("bench --workload " + source("workloads/stories-burst-n200.jsonl") +
                           " --save " + temp_path(".jsonl"));
  EXPECT_EQ(file.exit_code, 1);
  EXPECT_EQ(file.err,
            "conveyor bench: --save writes a made workload (--rate), not one read with "
            "--workload\n");
}

TEST(bench_command, client_threads_choose_the_clients_event_loops_of_a_target_run) {
  canned_server server;
  const std::string json_path = temp_path(".json");
  auto one = run_conveyor("bench " + made + " --target " + server.url() +
                          " --client-threads 1 --json " + json_path);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(requests_of(parsed(server.bodies())), requests_of(made_workload()));
  auto report = json::parse(read_file(json_path));
  EXPECT_EQ(report["settings"]["client_threads"], 1);
  EXPECT_EQ(report["runs"][0]["completed"], 3);
  // The client's own CPU over the run is measured and reported.
  EXPECT_TRUE(report["runs"][0]["process_cpu_s"].is_number()) << report.dump();
  EXPECT_NE(one.out.find("bench CPU per output token (us)"), std::string::npos) << one.out;
  std::remove(json_path.c_str());

  auto alone = run_conveyor("bench " + made + " --client-threads 1");
  EXPECT_EQ(alone.exit_code, 1);
  EXPECT_EQ(alone.err,
            "conveyor bench: --client-threads goes with --target (the client's threads)\n");
  auto negative =
      run_conveyor("bench " + made + " --target " + server.url() + " --client-threads -1");
  EXPECT_NE(negative.exit_code, 0);
  EXPECT_NE(negative.err.find("--client-threads"), std::string::npos) << negative.err;
}

TEST(bench_command, conveyors_own_server_takes_every_field_it_sends) {
  // The real server on stories260K: greedy requests with ignore_eos each run to max_tokens (300,
  // where greedy stories end sooner: see the in-process test above), none refused.
  background_conveyor serve{{"serve", "--port", "0", "--log-level", "info", "--threads", "1"}};
  const auto port = serve.wait_for("ready: model .* at http://127\\.0\\.0\\.1:(\\d+)/");
  ASSERT_FALSE(port.empty()) << serve.log();
  const std::string json_path = temp_path(".json");
  auto r = run_conveyor(
      "bench --rate inf --requests 2 --seed 1 --prompt-words 3,3 --max-tokens 300,300 -q "
      "--target http://127.0.0.1:" +
      port + " --temperature 0 --top-p 0.9 --top-k 40 --ignore-eos --json " + json_path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = json::parse(read_file(json_path));
  std::remove(json_path.c_str());
  const auto& run = j.at("runs").at(0);
  EXPECT_EQ(run.at("completed"), json(2)) << run;
  EXPECT_EQ(run.at("output_tokens"), json(600)) << run;
  EXPECT_EQ(j.at("settings").at("sampling"),
            json({{"temperature", 0.0}, {"top_p", 0.9}, {"top_k", 40}, {"ignore_eos", true}}));
}

TEST(bench_command, conversations_run_against_conveyors_own_server_turn_by_turn) {
  // The real server on stories260K over a real socket: 3 conversations of 3 turns, each turn
  // the conversation so far (stories260K's context is 512 tokens: a short system prompt).
  background_conveyor serve{{"serve", "--port", "0", "--log-level", "info", "--threads", "1"}};
  const auto port = serve.wait_for("ready: model .* at http://127\\.0\\.0\\.1:(\\d+)/");
  ASSERT_FALSE(port.empty()) << serve.log();
  const std::string json_path = temp_path(".json");
  auto r = run_conveyor(
      "bench --kind conversations --rate inf --conversations 3 --turns 3 --system-tokens 60 "
      "--user-words 4,8 --reply-tokens 12 --seed 2 -q --temperature 0 --ignore-eos "
      "--target http://127.0.0.1:" +
      port + " --json " + json_path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* row : {"TTFT turn 1 ms (mean/p50)", "TTFT turn 3 ms (mean/p50)",
                          "TTFT turns 2..3 ms (mean/p50)", "prefix cache hit rate"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  auto j = json::parse(read_file(json_path));
  std::remove(json_path.c_str());
  EXPECT_EQ(j.at("settings").at("kind"), json("conversations"));
  const auto& run = j.at("runs").at(0);
  EXPECT_EQ(run.at("requests"), json(9)) << run;
  EXPECT_EQ(run.at("completed"), json(9)) << run;
  EXPECT_EQ(run.at("output_tokens"), json(9 * 12)) << run;
  ASSERT_EQ(run.at("ttft_by_turn_s").size(), 3u) << run;
  for (const auto& turn : run.at("ttft_by_turn_s")) EXPECT_EQ(turn.at("count"), json(3));
  EXPECT_EQ(run.at("ttft_later_turns_s").at("count"), json(6));
  // Every turn's prompt counted: later turns carry the earlier ones, so they are longer.
  EXPECT_GT(run.at("prompt_tokens").get<int>(), 9 * 60);
  // The server may or may not report cached tokens: a rate in [0, 1], or null.
  const auto& rate = run.at("prefix_cache_hit_rate");
  if (!rate.is_null()) {
    EXPECT_GE(rate.get<double>(), 0.0);
    EXPECT_LE(rate.get<double>(), 1.0);
  }
}

TEST(bench_command, chat_workloads_save_load_and_refuse_what_they_cannot_mean) {
  canned_server server;
  const std::string path = temp_path(".jsonl");
  // shared-prefix: single-turn conversations after one system prompt, --requests of them.
  auto saved = run_conveyor(
      "bench --kind shared-prefix --rate inf --requests 4 --seed 5 "
      "--system-tokens 50 --save " +
      path);
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  EXPECT_NE(saved.err.find("bench: wrote 4 conversations (4 turns) to " + path), std::string::npos)
      << saved.err;
  auto loaded = conveyor::bench::load_chat_workload(path);
  ASSERT_TRUE(loaded);
  ASSERT_EQ(loaded->size(), 4u);
  for (const auto& c : *loaded) {
    EXPECT_EQ(c.system_prompt, loaded->front().system_prompt);
    EXPECT_EQ(c.user_messages.size(), 1u);
  }
  auto ran = run_conveyor("bench --kind shared-prefix --workload " + path + " -q --target " +
                          server.url());
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  // The canned server reports 40 of 100 prompt tokens cached.
  EXPECT_NE(ran.out.find("40.0% (160 / 400)"), std::string::npos) << ran.out;
  const auto bodies = parsed(server.bodies());
  ASSERT_EQ(bodies.size(), 4u);
  for (const auto& b : bodies) {
    EXPECT_EQ(b.at("messages").size(), 2u) << b;
    EXPECT_EQ(b.at("messages")[0].at("content"), json(loaded->front().system_prompt));
    EXPECT_EQ(b.at("stream_options"), json({{"include_usage", true}}));
  }
  std::remove(path.c_str());

  auto local = run_conveyor("bench --kind conversations --rate 1");
  EXPECT_EQ(local.exit_code, 1);
  EXPECT_EQ(local.err,
            "conveyor bench: --kind conversations runs against a server through "
            "/v1/chat/completions: give --target URL (for Conveyor, `conveyor serve` on another "
            "port)\n");
  auto mixed =
      run_conveyor("bench --kind shared-prefix --rate 1 --turns 3 --target " + server.url());
  EXPECT_EQ(mixed.exit_code, 1);
  EXPECT_EQ(mixed.err, "conveyor bench: --turns goes with --kind conversations\n");
  auto words = run_conveyor("bench --rate 1 --user-words 2,3 --target " + server.url());
  EXPECT_EQ(words.exit_code, 1);
  EXPECT_EQ(words.err,
            "conveyor bench: --user-words goes with --kind conversations or --kind "
            "shared-prefix\n");
  EXPECT_EQ(server.bodies().size(), 4u) << "nothing more was sent";
}
