// The stream pacer's rule, driven with made-up times: which events wait, for how long, and
// that none waits past its deadline.
#include "server/stream_pacer.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace conveyor::server {
namespace {

using namespace std::chrono_literals;
using verdict = stream_pacer::verdict;
using clock = stream_pacer::clock;

const clock::time_point t0 = clock::time_point{} + 1h;

TEST(stream_pacer, a_streams_first_event_goes_at_once) {
  stream_pacer p{16, 2ms};
  EXPECT_EQ(p.on_events(1, true, t0), verdict::write);
  EXPECT_FALSE(p.holding());
}

TEST(stream_pacer, a_fast_streams_events_wait_until_the_oldest_is_due) {
  // Events 0.4 ms apart (a small model's steps): the first goes, the next ones wait; the
  // deadline is the first waiting event's arrival plus the delay; an event coming after the
  // deadline takes all of them along.
  stream_pacer p{16, 2ms};
  ASSERT_EQ(p.on_events(1, true, t0), verdict::write);
  EXPECT_EQ(p.on_events(1, false, t0 + 400us), verdict::hold);
  EXPECT_TRUE(p.holding());
  EXPECT_EQ(p.deadline(), t0 + 2400us);
  for (auto at : {800us, 1200us, 1600us, 2000us})
    EXPECT_EQ(p.on_events(1, false, t0 + at), verdict::hold) << at.count();
  EXPECT_EQ(p.deadline(), t0 + 2400us) << "the deadline is the oldest event's";
  EXPECT_EQ(p.on_events(1, false, t0 + 2400us), verdict::write);
  EXPECT_FALSE(p.holding());
  // The next round's deadline starts from its own first event.
  EXPECT_EQ(p.on_events(1, false, t0 + 2800us), verdict::hold);
  EXPECT_EQ(p.deadline(), t0 + 4800us);
}

TEST(stream_pacer, the_timer_releases_what_waits) {
  stream_pacer p{16, 2ms};
  ASSERT_EQ(p.on_events(1, true, t0), verdict::write);
  ASSERT_EQ(p.on_events(1, false, t0 + 100us), verdict::hold);
  p.release();
  EXPECT_FALSE(p.holding());
  // After a release the next fast event waits again, with a new deadline.
  EXPECT_EQ(p.on_events(1, false, t0 + 2200us), verdict::write)
      << "2.1 ms after the one before: slow";
  EXPECT_EQ(p.on_events(1, false, t0 + 2300us), verdict::hold);
  EXPECT_EQ(p.deadline(), t0 + 4300us);
}

TEST(stream_pacer, a_slow_stream_is_written_event_by_event) {
  // Events 1 ms or more apart with a 2 ms delay: gathering would only delay them.
  stream_pacer p{16, 2ms};
  ASSERT_EQ(p.on_events(1, true, t0), verdict::write);
  for (int i = 1; i < 10; ++i) EXPECT_EQ(p.on_events(1, false, t0 + i * 1ms), verdict::write) << i;
  EXPECT_EQ(p.on_events(1, false, t0 + 9999us), verdict::hold) << "0.999 ms after the one before";
}

TEST(stream_pacer, an_event_after_a_pause_takes_the_waiting_ones_along) {
  stream_pacer p{16, 10ms};
  ASSERT_EQ(p.on_events(1, true, t0), verdict::write);
  ASSERT_EQ(p.on_events(1, false, t0 + 1ms), verdict::hold);
  ASSERT_EQ(p.on_events(1, false, t0 + 2ms), verdict::hold);
  // 5 ms later (half the delay): the stream slowed down, everything goes.
  EXPECT_EQ(p.on_events(1, false, t0 + 7ms), verdict::write);
  EXPECT_FALSE(p.holding());
}

TEST(stream_pacer, at_most_max_events_go_in_one_write) {
  stream_pacer p{3, 1s};
  ASSERT_EQ(p.on_events(1, true, t0), verdict::write);
  EXPECT_EQ(p.on_events(1, false, t0 + 1ms), verdict::hold);
  EXPECT_EQ(p.on_events(1, false, t0 + 2ms), verdict::hold);
  EXPECT_EQ(p.on_events(1, false, t0 + 3ms), verdict::write) << "the third waiting event";
  // A step of several events counts them all.
  EXPECT_EQ(p.on_events(2, false, t0 + 4ms), verdict::hold);
  EXPECT_EQ(p.on_events(2, false, t0 + 5ms), verdict::write);
}

TEST(stream_pacer, one_event_or_no_delay_writes_everything_at_once) {
  for (auto [events, delay] : {std::pair{std::size_t{1}, clock::duration{2ms}},
                               std::pair{std::size_t{16}, clock::duration::zero()}}) {
    stream_pacer p{events, delay};
    EXPECT_FALSE(p.can_hold());
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(p.on_events(1, i == 0, t0 + i * 1us), verdict::write) << i;
  }
  EXPECT_TRUE((stream_pacer{2, 1ms}.can_hold()));
}

TEST(stream_pacer, each_choices_first_events_go_at_once) {
  // A request with several choices: each one's first events (its time to first token) go at
  // once even while others wait, and take the waiting ones along.
  stream_pacer p{16, 2ms};
  ASSERT_EQ(p.on_events(1, true, t0), verdict::write);
  ASSERT_EQ(p.on_events(1, false, t0 + 10us), verdict::hold);
  EXPECT_EQ(p.on_events(1, true, t0 + 20us), verdict::write);
  EXPECT_FALSE(p.holding());
  EXPECT_EQ(p.on_events(1, false, t0 + 30us), verdict::hold);
}

TEST(stream_pacer, no_event_waits_past_its_deadline) {
  // Events at irregular fast gaps, the caller's timer firing at each deadline: every event
  // goes out at most the delay after it came.
  const auto delay = 2ms;
  stream_pacer p{16, delay};
  std::vector<clock::time_point> waiting;
  clock::duration longest{};
  auto now = t0;
  const clock::duration gaps[] = {10us, 700us, 90us, 300us, 950us, 20us, 400us, 600us};
  auto write_all = [&](clock::time_point at) {
    for (auto came : waiting) longest = std::max(longest, at - came);
    waiting.clear();
  };
  for (int i = 0; i < 400; ++i) {
    const auto next = now + gaps[i % 8];
    if (p.holding() && p.deadline() <= next) {
      // The timer fires first.
      write_all(p.deadline());
      p.release();
    }
    now = next;
    waiting.push_back(now);
    if (p.on_events(1, i == 0, now) == verdict::write) write_all(now);
  }
  EXPECT_LE(longest, clock::duration{delay});
  EXPECT_GT(longest, clock::duration{delay} / 2) << "events did wait";
}

}  // namespace
}  // namespace conveyor::server
