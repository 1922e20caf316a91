// The compute pool: every item of a loop runs exactly once, pieces run concurrently on distinct
// threads, a held-up worker delays only its own piece (the caller takes the rest), sleeping
// workers wake for the next loop that has a full grain for them, and nested, concurrent and
// failing calls end cleanly.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/work_pool.hpp"

using namespace conveyor::kernels;
using namespace std::chrono_literals;

namespace {

// A condition one thread waits for and another makes true. The wait gives up after a minute so
// that a pool that never runs the other piece fails the test instead of hanging it; the test's
// outcome never depends on how fast the machine is.
class event {
 public:
  void set() {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      set_ = true;
    }
    cv_.notify_all();
  }
  bool wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, 60s, [&] { return set_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool set_ = false;
};

// Runs the loop and checks that every index of [0, n) was visited exactly once.
void expect_each_once(work_pool& pool, int64_t n, int64_t grain) {
  std::unique_ptr<std::atomic<int>[]> hits(new std::atomic<int>[size_t(n)]);
  for (int64_t i = 0; i < n; ++i) hits[size_t(i)] = 0;
  std::atomic<int64_t> calls{0};
  pool.run(n, grain, [&](int64_t begin, int64_t end) {
    ASSERT_LE(0, begin);
    ASSERT_LT(begin, end);
    ASSERT_LE(end, n);
    ++calls;
    for (int64_t i = begin; i < end; ++i) ++hits[size_t(i)];
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)], 1) << "n " << n << " index " << i;
  const int64_t threads = pool.threads();
  EXPECT_LE(calls.load(), threads * work_pool::pieces_per_thread);
  if (n > grain) {
    // One piece per started grain, rounded up to a multiple of the threads.
    EXPECT_LE(calls.load(), ((n + grain - 1) / grain + threads - 1) / threads * threads);
  }
}

// Runs a loop of two one-item pieces, each of which waits until the other has started: it ends
// only if two threads run them at once. Returns how many distinct threads ran pieces.
size_t run_two_meeting_pieces(work_pool& pool) {
  event first, second;
  std::mutex m;
  std::set<std::thread::id> threads;
  std::atomic<int> started{0};
  pool.run(2, 1, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(end - begin, 1);
    {
      std::lock_guard<std::mutex> guard(m);
      threads.insert(std::this_thread::get_id());
    }
    if (started.fetch_add(1) == 0) {
      EXPECT_TRUE(second.wait()) << "the other piece never started";
      first.set();
    } else {
      second.set();
      EXPECT_TRUE(first.wait());
    }
  });
  return threads.size();
}

}  // namespace

TEST(work_pool, every_item_runs_exactly_once) {
  for (auto spin : {0us, work_pool::default_spin}) {
    work_pool pool(4, spin);
    for (int64_t n : {1, 2, 3, 7, 64, 1000, 100003})
      for (int64_t grain : {1, 3, 50, 1000}) expect_each_once(pool, n, grain);
  }
}

TEST(work_pool, a_split_loop_is_cut_into_equal_pieces_the_threads_share_evenly) {
  struct cut {
    int64_t n, grain, threads, piece;
  };
  // s15m's products at batch 1, in 48-column panels: w13 (32 panels, a grain of 9) went
  // 9, 9, 9, 5 and the classifier (11) 9 and 2; qkv (18) and w2 (6, grain 3) were even already.
  for (const auto& c : {cut{32, 9, 2, 8}, cut{11, 9, 2, 6}, cut{18, 9, 2, 9}, cut{6, 3, 2, 3},
                        // Three grains make four pieces on two threads, not three.
                        cut{27, 9, 2, 7},
                        // At most pieces_per_thread each.
                        cut{1000, 1, 2, 125}, cut{1000, 1, 3, 84}, cut{10, 1, 4, 1},
                        // One thread: one piece per grain, up to four.
                        cut{20, 9, 1, 7}}) {
    SCOPED_TRACE(::testing::Message() << c.n << " items, grain " << c.grain << ", "
                                      << c.threads << " threads");
    const int64_t piece = work_pool::piece_size(c.n, c.grain, c.threads);
    EXPECT_EQ(piece, c.piece);
    const int64_t pieces = (c.n + piece - 1) / piece;
    EXPECT_LE(pieces, c.threads * work_pool::pieces_per_thread);
    // Every piece but the last is full, and the last is short by less than one item per piece.
    EXPECT_GT(c.n - (pieces - 1) * piece, piece - pieces);
  }
}

TEST(work_pool, a_loop_within_its_grain_runs_on_the_caller_in_one_call) {
  work_pool pool(4);
  std::vector<std::thread::id> ran;
  pool.run(10, 10, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 10);
    ran.push_back(std::this_thread::get_id());
  });
  ASSERT_EQ(ran.size(), 1u);
  EXPECT_EQ(ran[0], std::this_thread::get_id());
  pool.run(0, 1, [&](int64_t, int64_t) { ADD_FAILURE() << "an empty loop ran"; });
}

TEST(work_pool, pieces_run_concurrently_on_distinct_threads) {
  work_pool pool(2);
  EXPECT_EQ(run_two_meeting_pieces(pool), 2u);
  EXPECT_EQ(pool.pieces_by_workers(), 1u);
}

TEST(work_pool, a_held_up_worker_delays_only_its_own_piece) {
  // Eight pieces of one item on two threads. The caller's first piece waits until a worker holds
  // a piece; that worker's piece waits until the other seven are done, which only the caller can
  // do: with a static split in halves the worker would hold four and this would never finish.
  work_pool pool(2);
  const auto caller = std::this_thread::get_id();
  event worker_in, others_done;
  std::atomic<int> by_caller{0};
  std::atomic<bool> caller_waited{false};
  pool.run(8, 1, [&](int64_t begin, int64_t end) {
    ASSERT_EQ(end - begin, 1);
    if (std::this_thread::get_id() == caller) {
      if (!caller_waited.exchange(true)) {
        EXPECT_TRUE(worker_in.wait()) << "no worker woke";
      }
      if (++by_caller == 7) others_done.set();
    } else {
      worker_in.set();
      EXPECT_TRUE(others_done.wait()) << "the caller did not take the remaining pieces";
    }
  });
  EXPECT_EQ(by_caller.load(), 7);
  EXPECT_EQ(pool.pieces_by_workers(), 1u);
}

TEST(work_pool, idle_workers_sleep_and_wake_for_the_next_loop) {
  work_pool pool(3, 0us);
  for (int round = 0; round < 3; ++round) {
    // With no spin, both workers go to sleep as soon as they are idle; wait until they have.
    while (pool.sleeping() < 2) std::this_thread::yield();
    EXPECT_EQ(run_two_meeting_pieces(pool), 2u) << "round " << round;
  }
  // A worker ran at least one piece a round (both, where the caller was descheduled before it
  // claimed one).
  EXPECT_GE(pool.pieces_by_workers(), 3u);
  EXPECT_LE(pool.pieces_by_workers(), 6u);
  EXPECT_GE(pool.sleeps(), 4u);
}

TEST(work_pool, a_sleeping_worker_is_woken_only_for_a_full_grain_beyond_the_callers_piece) {
  work_pool pool(2, 0us);
  auto items_run = [&](int64_t n, int64_t grain) {
    std::atomic<int64_t> items{0};
    pool.run(n, grain, [&](int64_t begin, int64_t end) { items += end - begin; });
    return items.load();
  };
  // With no spin the worker sleeps as soon as it is idle, and stays asleep until notified.
  while (pool.sleeping() < 1) std::this_thread::yield();
  // 15 items in grains of 8: two pieces, the second shorter than a grain. The caller runs both.
  EXPECT_EQ(items_run(15, 8), 15);
  EXPECT_EQ(pool.wakes(), 0u);
  EXPECT_EQ(pool.pieces_by_workers(), 0u);
  EXPECT_EQ(pool.sleeping(), 1);
  // 16 items in grains of 8: a full grain for the worker, which is woken.
  EXPECT_EQ(items_run(16, 8), 16);
  EXPECT_EQ(pool.wakes(), 1u);
  // Once more after it sleeps again: every loop with two full grains wakes it.
  while (pool.sleeping() < 1) std::this_thread::yield();
  EXPECT_EQ(items_run(1000, 8), 1000);
  EXPECT_EQ(pool.wakes(), 2u);
}

TEST(work_pool, a_loop_inside_a_piece_runs_on_that_thread) {
  work_pool pool(2);
  std::atomic<int64_t> total{0};
  pool.run(4, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto outer = std::this_thread::get_id();
      pool.run(100, 1, [&](int64_t b, int64_t e) {
        EXPECT_EQ(std::this_thread::get_id(), outer);
        total += e - b;
      });
    }
  });
  EXPECT_EQ(total.load(), 400);
}

TEST(work_pool, concurrent_callers_each_get_every_item) {
  work_pool pool(3);
  auto caller = [&] {
    for (int i = 0; i < 300; ++i) expect_each_once(pool, 97 + i, 2);
  };
  std::thread a(caller), b(caller);
  caller();
  a.join();
  b.join();
}

TEST(work_pool, an_exception_is_rethrown_after_every_other_piece_ran) {
  work_pool pool(3);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.run(12, 1,
                        [&](int64_t begin, int64_t) {
                          if (begin == 5) throw std::runtime_error("piece 5");
                          ++ran;
                        }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 11);
  expect_each_once(pool, 1000, 1);  // and the pool still works
}

TEST(work_pool, resize_changes_the_threads_that_run_pieces) {
  work_pool pool(3);
  EXPECT_EQ(pool.threads(), 3);
  pool.resize(1);
  EXPECT_EQ(pool.threads(), 1);
  const auto caller = std::this_thread::get_id();
  int calls = 0;
  pool.run(1000, 1, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 1000);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  pool.resize(2);
  EXPECT_EQ(pool.threads(), 2);
  expect_each_once(pool, 1000, 1);
}

TEST(work_pool, many_short_loops_in_a_row) {
  work_pool pool(2, 5us);
  std::vector<int64_t> sums(64);
  for (int round = 0; round < 20000; ++round) {
    pool.run(64, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) sums[size_t(i)] += i;
    });
  }
  for (int64_t i = 0; i < 64; ++i) ASSERT_EQ(sums[size_t(i)], 20000 * i);
}
