// A sink's view of its request across runs: a run lost before its first chunk runs again (a
// bounded number of times, never after a cancel), with a fresh id and the same request; chunks
// and ends of earlier runs are dropped.
#include <gtest/gtest.h>

#include "pipeline/rerun_tracker.hpp"

using namespace conveyor;
using namespace conveyor::pipeline;

namespace {

generate_request request(request_id id) {
  generate_request r;
  r.id = id;
  r.prompt = "Once upon a time";
  r.params.max_tokens = 12;
  r.params.seed = 42;
  r.timeout_s = 30;
  r.arrival = 1000;
  return r;
}

request_result lost(request_id id) {
  return make_failure(id, outcome::failed, ec::executor_lost,
                      "executor w/cpu:0 was lost after the request had started streaming", {});
}

request_result finished(request_id id) {
  request_result r;
  r.id = id;
  r.how = outcome::finished;
  r.reason = finish_reason::length;
  return r;
}

token_chunk chunk(request_id id) {
  return token_chunk{id, "Once", {1}};
}

}  // namespace

TEST(rerun_tracker, a_run_lost_before_its_first_chunk_runs_again_as_the_same_request) {
  rerun_tracker runs{request(5), 2};
  EXPECT_EQ(runs.current(), 5u);
  EXPECT_EQ(runs.on_result(lost(5)), rerun_verdict::rerun);
  const auto again = runs.rerun(9);
  EXPECT_EQ(again.id, 9u);
  EXPECT_EQ(runs.current(), 9u);
  EXPECT_EQ(runs.reruns(), 1);
  // The same request: prompt, sampling (seed included), and arrival, so the deadline stays.
  const auto first = request(5);
  EXPECT_EQ(again.prompt, first.prompt);
  EXPECT_EQ(again.params.max_tokens, first.params.max_tokens);
  EXPECT_EQ(again.params.seed, first.params.seed);
  EXPECT_EQ(again.timeout_s, first.timeout_s);
  EXPECT_EQ(again.arrival, first.arrival);
  EXPECT_EQ(runs.on_chunk(chunk(9)), rerun_verdict::deliver);
  EXPECT_EQ(runs.on_result(finished(9)), rerun_verdict::deliver);
}

TEST(rerun_tracker, a_run_lost_after_a_chunk_fails) {
  rerun_tracker runs{request(5), 2};
  EXPECT_EQ(runs.on_chunk(chunk(5)), rerun_verdict::deliver);
  EXPECT_EQ(runs.on_result(lost(5)), rerun_verdict::deliver) << "the client heard part of it";
  EXPECT_EQ(runs.reruns(), 0);
}

TEST(rerun_tracker, only_executor_lost_runs_again) {
  for (auto code : {ec::expired, ec::internal, ec::shutting_down, ec::rejected_queue_full}) {
    rerun_tracker runs{request(5), 2};
    EXPECT_EQ(runs.on_result(make_failure(5, outcome::failed, code, "no", {})),
              rerun_verdict::deliver)
        << to_string(code);
  }
  rerun_tracker runs{request(5), 2};
  EXPECT_EQ(runs.on_result(make_failure(5, outcome::cancelled, ec::cancelled, "cancelled", {})),
            rerun_verdict::deliver);
  EXPECT_EQ(runs.on_result(finished(5)), rerun_verdict::deliver);
}

TEST(rerun_tracker, a_cancelled_request_does_not_run_again) {
  rerun_tracker runs{request(5), 2};
  runs.cancelled();
  EXPECT_EQ(runs.on_result(lost(5)), rerun_verdict::deliver);
}

TEST(rerun_tracker, a_request_runs_again_at_most_max_reruns_times) {
  rerun_tracker runs{request(5), 2};
  ASSERT_EQ(runs.on_result(lost(5)), rerun_verdict::rerun);
  runs.rerun(6);
  ASSERT_EQ(runs.on_result(lost(6)), rerun_verdict::rerun);
  runs.rerun(7);
  EXPECT_EQ(runs.on_result(lost(7)), rerun_verdict::deliver) << "two reruns were allowed";
  rerun_tracker never{request(5), 0};
  EXPECT_EQ(never.on_result(lost(5)), rerun_verdict::deliver);
}

TEST(rerun_tracker, an_earlier_run_s_late_chunk_and_end_are_dropped) {
  rerun_tracker runs{request(5), 2};
  ASSERT_EQ(runs.on_result(lost(5)), rerun_verdict::rerun);
  runs.rerun(6);
  EXPECT_EQ(runs.on_chunk(chunk(5)), rerun_verdict::ignore);
  EXPECT_EQ(runs.on_result(finished(5)), rerun_verdict::ignore);
  // The late chunk of run 5 did not count as heard for run 6: its loss still runs again.
  EXPECT_EQ(runs.on_result(lost(6)), rerun_verdict::rerun);
}

TEST(rerun_tracker, a_lost_run_with_held_back_text_fails) {
  // A tail is text the sink would deliver with the end: the run is not unheard.
  rerun_tracker runs{request(5), 2};
  auto r = lost(5);
  r.tail = "\xc3";
  EXPECT_EQ(runs.on_result(r), rerun_verdict::deliver);
}
