// The batcher's books without CAF: a request's stages, the executors' in-flight counts, and what
// becomes of a lost executor's requests; the pipeline's own checks of a request.
#include <limits>

#include <gtest/gtest.h>

#include "config/config.hpp"
#include "pipeline/request_checks.hpp"
#include "pipeline/request_ledger.hpp"

using namespace conveyor;
using namespace conveyor::pipeline;

namespace {

// What an owner keeps per request; the tests only check it is carried along.
struct tag {
  std::string name;
};

sequence_request request(request_id id, size_t prompt_tokens = 3) {
  sequence_request r;
  r.id = id;
  r.prompt.assign(prompt_tokens, 7);
  r.times.arrival = 100;
  r.times.admitted = 200;
  r.times.first_token = 300;
  return r;
}

}  // namespace

TEST(request_ledger, a_request_goes_from_tokenizing_to_waiting_to_running_and_ends) {
  request_ledger<tag> ledger;
  ASSERT_TRUE(ledger.open(1, 100, tag{"one"}));
  EXPECT_FALSE(ledger.open(1, 200, tag{"again"})) << "an id in use is refused";
  ASSERT_NE(ledger.find(1), nullptr);
  EXPECT_EQ(ledger.find(1)->handles.name, "one");
  EXPECT_EQ(ledger.find(1)->arrival, 100);
  EXPECT_EQ(ledger.counts().tokenizing, 1u);
  ledger.waiting(1);
  EXPECT_EQ(ledger.counts().waiting, 1u);
  const uint64_t exec = ledger.add_executor();
  ledger.running(1, exec, request(1));
  EXPECT_EQ(ledger.counts().running, 1u);
  EXPECT_EQ(ledger.find(1)->executor, exec);
  ASSERT_TRUE(ledger.find(1)->sent.has_value()) << "kept to run again if the executor is lost";
  ledger.started(1);
  EXPECT_TRUE(ledger.find(1)->started);
  EXPECT_FALSE(ledger.find(1)->sent.has_value()) << "a streaming request's copy is dropped";
  ledger.close(1);
  EXPECT_EQ(ledger.find(1), nullptr);
  const auto c = ledger.counts();
  EXPECT_EQ(c.tokenizing + c.waiting + c.running, 0u);
}

TEST(request_ledger, requests_sent_and_not_yet_received_are_in_flight) {
  request_ledger<tag> ledger;
  const uint64_t a = ledger.add_executor(), b = ledger.add_executor();
  EXPECT_NE(a, b);
  EXPECT_NE(a, 0u);
  EXPECT_EQ(ledger.in_flight(a, 0), 0);
  ledger.sent(a, 3);
  ledger.sent(a, 2);
  ledger.sent(b, 1);
  EXPECT_EQ(ledger.in_flight(a, 0), 5);
  EXPECT_EQ(ledger.in_flight(a, 4), 1) << "its report says it received 4";
  EXPECT_EQ(ledger.in_flight(a, 5), 0);
  EXPECT_EQ(ledger.in_flight(b, 0), 1);
  EXPECT_EQ(ledger.in_flight(99, 0), 0) << "an unknown executor has nothing in flight";
}

TEST(request_ledger, a_lost_executors_requests_run_again_fail_or_end_cancelled) {
  request_ledger<tag> ledger;
  const uint64_t lost = ledger.add_executor(), kept = ledger.add_executor();
  for (request_id id = 1; id <= 5; ++id) ledger.open(id, 100, tag{});
  ledger.running(1, lost, request(1));      // nothing streamed: runs again
  ledger.running(2, lost, request(2, 9));   // streamed: fails
  ledger.started(2);
  ledger.running(3, lost, request(3));      // cancelled: ends cancelled
  ledger.find(3)->cancel_requested = true;
  ledger.running(4, kept, request(4));      // on the other executor: untouched
  ledger.waiting(5);                        // waiting: untouched
  ledger.sent(lost, 3);

  auto plan = ledger.lose_executor(lost);
  EXPECT_EQ(plan.cancelled, std::vector<request_id>{3});
  EXPECT_EQ(plan.failed, std::vector<request_id>{2});
  ASSERT_EQ(plan.again.size(), 1u);
  EXPECT_EQ(plan.again[0].id, 1u);
  EXPECT_EQ(plan.again[0].prompt.size(), 3u);
  EXPECT_EQ(plan.again[0].times.arrival, 100) << "its stamps up to the queue stay";
  EXPECT_EQ(plan.again[0].times.admitted, 0) << "admission and first token are cleared";
  EXPECT_EQ(plan.again[0].times.first_token, 0);
  EXPECT_EQ(ledger.find(1)->stage, request_stage::waiting);
  EXPECT_EQ(ledger.find(1)->executor, 0u);
  EXPECT_FALSE(ledger.find(1)->sent.has_value());
  // The ended ones stay live until the owner ends them (it needs their handles to).
  EXPECT_NE(ledger.find(2), nullptr);
  EXPECT_NE(ledger.find(3), nullptr);
  EXPECT_EQ(ledger.find(4)->stage, request_stage::running);
  EXPECT_EQ(ledger.find(4)->executor, kept);
  EXPECT_EQ(ledger.find(5)->stage, request_stage::waiting);
  EXPECT_EQ(ledger.in_flight(lost, 0), 0) << "a lost executor's count is gone";
  // Losing it again finds nothing.
  auto again = ledger.lose_executor(lost);
  EXPECT_TRUE(again.cancelled.empty() && again.failed.empty() && again.again.empty());
}

TEST(request_checks, each_problem_is_named) {
  sampling::sampling_params p;
  EXPECT_EQ(check_request(p, 0), std::nullopt);
  p.max_tokens = 0;
  EXPECT_EQ(check_request(p, 0), "max_tokens must be at least 1, got 0");
  p = {};
  p.temperature = -0.5f;
  EXPECT_EQ(check_request(p, 0), "temperature must be between 0 and 2, got -0.5");
  p.temperature = 2.5f;
  EXPECT_EQ(check_request(p, 0), "temperature must be between 0 and 2, got 2.5")
      << "the same upper limit as the HTTP server's and the configuration's";
  p.temperature = 2.0f;
  EXPECT_EQ(check_request(p, 0), std::nullopt);
  p = {};
  p.top_p = 0;
  EXPECT_EQ(check_request(p, 0), "top_p must be greater than 0 and at most 1, got 0");
  p.top_p = 1.5f;
  EXPECT_EQ(check_request(p, 0), "top_p must be greater than 0 and at most 1, got 1.5");
  p = {};
  p.top_k = -1;
  EXPECT_EQ(check_request(p, 0), "top_k must be at least 0, got -1");
  p = {};
  EXPECT_EQ(check_request(p, -1), "timeout must not be negative");
  EXPECT_EQ(check_request(p, 2.5), std::nullopt);
  // 1e10 s in nanoseconds overflows the deadline's int64: refused instead of expiring at once.
  EXPECT_EQ(check_request(p, 1e10), "timeout must be at most 31536000 seconds (a year), got 1e+10");
  EXPECT_EQ(check_request(p, 31536000), std::nullopt);
}

TEST(request_checks, generation_defaults_are_the_shipped_configurations) {
  // config/conveyor.toml, a file outside the code, says what a request that sets nothing gets.
  auto shipped = config::load_file(std::string{CONVEYOR_SOURCE_DIR} + "/config/conveyor.toml");
  ASSERT_TRUE(shipped) << message_of(shipped.error());
  const sampling::sampling_params p;
  EXPECT_EQ(p.max_tokens, shipped->generation.max_tokens);
  EXPECT_EQ(p.temperature, shipped->generation.temperature);
  EXPECT_EQ(p.top_p, shipped->generation.top_p);
  EXPECT_EQ(p.top_k, shipped->generation.top_k);
  EXPECT_EQ(check_request(p, 0), std::nullopt);
}

TEST(request_checks, a_prompt_and_its_max_tokens_must_fit_in_the_context) {
  // stories260K's context is 512 tokens.
  EXPECT_EQ(check_context(5, 507, 512), std::nullopt) << "exactly the context fits";
  EXPECT_EQ(check_context(5, 508, 512),
            "the prompt has 5 tokens and max_tokens is 508: together 513, more than the context "
            "of 512 tokens");
  EXPECT_EQ(check_context(600, 1, 512),
            "the prompt has 600 tokens and max_tokens is 1: together 601, more than the context "
            "of 512 tokens");
  // No overflow at the ends of the ranges.
  EXPECT_NE(check_context(size_t{1} << 40, std::numeric_limits<int32_t>::max(), 512), std::nullopt);
}
