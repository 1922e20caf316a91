// A client that leaves in the middle of a stream cancels its request and frees the slot.
#include <gtest/gtest.h>

#include <thread>

#include "tests/e2e/conveyor_process.hpp"

namespace conveyor::e2e {
namespace {

using namespace std::chrono_literals;

// Counts the stream events received so far.
std::size_t events_in(const std::string& raw) {
  std::size_t n = 0;
  for (auto pos = raw.find("data: "); pos != std::string::npos; pos = raw.find("data: ", pos + 1))
    ++n;
  return n;
}

TEST(e2e_cancel, client_leaving_mid_stream_frees_the_slot) {
  conveyor_process server{one_slot_args()};
  ASSERT_TRUE(server.ok()) << server.error();
  // Alone, a request of 480 tokens holds the one slot for seconds.
  auto leaving = open_stream(server.port(), stream_body(480));
  ASSERT_TRUE(leaving);
  // Read three events: a needle that never comes makes read_until keep receiving for 20 ms.
  for (auto t0 = std::chrono::steady_clock::now(); events_in(leaving->raw()) < 3;) {
    leaving->read_until("\x01", 20ms);
    ASSERT_LT(std::chrono::steady_clock::now() - t0, 10s) << leaving->raw();
  }
  leaving->close();

  auto next = server.request("POST", "/v1/completions",
                             R"({"prompt": "Once upon a time", "max_tokens": 8})", 60s);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200u) << next->body;
  EXPECT_EQ(next->json()["usage"]["completion_tokens"], 8);

  // The slot was freed when the client left: the pipeline counts the long request cancelled,
  // not finished (had it run to its end first, two would have finished and none be cancelled).
  std::string metrics;
  for (auto t1 = std::chrono::steady_clock::now();
       metric_value(metrics, R"(conveyor_requests_total{outcome="finished"})") != 1;) {
    metrics = server.metrics();
    ASSERT_LT(std::chrono::steady_clock::now() - t1, 30s) << metrics;
  }
  EXPECT_EQ(metric_value(metrics, R"(conveyor_requests_total{outcome="cancelled"})"), 1) << metrics;
  EXPECT_EQ(metric_value(metrics, "conveyor_http_client_disconnects_total"), 1) << metrics;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace conveyor::e2e
