// The prefix cache through the server: with two executors, requests that share a long beginning
// all find it cached after the first, one after another and several at once (the batcher routes
// them to the executor that holds it), with the same text as the first; /metrics counts the
// tokens looked up and found, and each executor's blocks.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <iterator>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/conveyor_process.hpp"

namespace conveyor::e2e {
namespace {

using nlohmann::json;

// The 84 prompt tokens of request `i`: 80 shared (five blocks of 16, `first` on), then four of
// its own.
json prompt_of(int i, int first = 300) {
  json ids = json::array();
  for (int t = 0; t < 80; ++t) ids.push_back(first + t % 97);
  for (int t = 0; t < 4; ++t) ids.push_back(20 + 4 * i + t);
  return ids;
}

// A greedy completion of request `i`'s prompt: its body.
json complete(conveyor_process& server, int i, int first = 300) {
  const json body{{"prompt", prompt_of(i, first)}, {"max_tokens", 8}, {"temperature", 0}};
  const auto reply = server.request("POST", "/v1/completions", body.dump());
  EXPECT_TRUE(reply);
  if (!reply) return json{};
  EXPECT_EQ(reply->status, 200u) << reply->body;
  return json::parse(reply->body, nullptr, false);
}

// Two executors of one slot each: without routing, requests sent at once would spread over both
// and each executor would compute the shared beginning once; routed, they wait for the executor
// that holds it (it runs fewer than 4 sequences more than the other), so only the very first
// computes it.
TEST(e2e_prefix_cache, two_executors_route_a_shared_beginning_to_where_it_is_cached) {
  conveyor_process server{{"--set", "executors=cpu,cpu", "--set", "executors[0].slots=1", "--set",
                           "executors[1].slots=1", "--threads", "1"}};
  ASSERT_TRUE(server.ok()) << server.error();
  // Both executors known to the batcher (each logs "executor NAME ready" at its first pull), so
  // that the first request is routed too.
  const std::regex ready(R"re(executor \S+ ready)re");
  for (int tries = 0; tries < 600; ++tries) {
    const auto log = server.log();
    if (std::distance(std::sregex_iterator(log.begin(), log.end(), ready),
                      std::sregex_iterator()) >= 2)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const auto first = complete(server, 0);
  EXPECT_EQ(first["usage"]["prompt_tokens"], 84);
  EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // One after another: every one finds the five shared blocks.
  for (int i = 1; i <= 6; ++i) {
    const auto body = complete(server, i);
    EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 80) << "request " << i;
  }
  // Four at once with another beginning: one computes it, three find it.
  std::vector<std::future<json>> at_once;
  for (int i = 7; i <= 10; ++i)
    at_once.push_back(std::async(std::launch::async, [&, i] { return complete(server, i, 200); }));
  int computed = 0, found = 0;
  for (auto& f : at_once) {
    const auto cached = f.get()["usage"]["prompt_tokens_details"]["cached_tokens"];
    computed += cached == 0;
    found += cached == 80;
  }
  EXPECT_EQ(computed, 1);
  EXPECT_EQ(found, 3);
  // The same prompt again gives the first one's text.
  EXPECT_EQ(complete(server, 0)["choices"][0]["text"], first["choices"][0]["text"]);

  // Timings reach the metrics actor in batches: wait for the twelfth request's.
  std::string text;
  for (int tries = 0; tries < 300; ++tries) {
    text = server.metrics();
    if (metric_value(text, "conveyor_prefix_cache_queries_total") >= 12 * 84) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(metric_value(text, "conveyor_prefix_cache_queries_total"), 12 * 84) << text;
  EXPECT_EQ(metric_value(text, "conveyor_prefix_cache_hits_total"), 10 * 80) << text;
  // Each beginning is cached on one executor only (an executor that never ran a step reports no
  // blocks); both may be on the same.
  const std::regex cached_line(R"re(\nconveyor_kv_blocks_cached\{executor="([^"]+)"\} (\d+))re");
  int holding = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), cached_line), end; it != end; ++it)
    holding += std::stoi((*it)[2]) >= 5;
  EXPECT_GE(holding, 1) << text;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace conveyor::e2e
