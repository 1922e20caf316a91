#include "kernels/work_pool.hpp"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace conveyor::kernels {

namespace {

// True on the pool's workers, and on a caller while it runs pieces: a `run` from there runs
// serially instead of waiting for threads that are busy with the outer loop.
thread_local bool inside_pool = false;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// state_ = generation (32 bits) | pieces of the job (16 bits) | next unclaimed piece (16 bits).
constexpr int64_t max_pieces = 0xffff;
uint32_t generation_of(uint64_t s) { return uint32_t(s >> 32); }
int64_t pieces_of(uint64_t s) { return int64_t((s >> 16) & 0xffffu); }
int64_t next_of(uint64_t s) { return int64_t(s & 0xffffu); }

}  // namespace

work_pool::work_pool(int32_t threads, std::chrono::microseconds spin) : spin_(spin) {
  start(threads);
}

work_pool::~work_pool() {
  std::lock_guard<std::mutex> guard(run_mutex_);
  stop_workers();
}

void work_pool::resize(int32_t threads) {
  std::lock_guard<std::mutex> guard(run_mutex_);
  stop_workers();
  start(threads);
}

void work_pool::start(int32_t threads) {
  threads = std::clamp<int32_t>(threads, 1, int32_t(max_pieces / pieces_per_thread));
  stop_.store(false);
  const uint32_t seen = generation_of(state_.load());
  for (int32_t i = 1; i < threads; ++i) workers_.emplace_back([this, seen] {
    inside_pool = true;
    worker_loop(seen);
  });
  threads_.store(threads);
}

void work_pool::stop_workers() {
  {
    std::lock_guard<std::mutex> guard(sleep_mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
  workers_.clear();
  threads_.store(1);
}

void work_pool::worker_loop(uint32_t seen) {
  for (;;) {
    // Poll for the next job for up to spin_, then sleep until one is published.
    uint32_t gen = seen;
    const auto deadline = std::chrono::steady_clock::now() + spin_;
    for (uint32_t i = 0;; ++i) {
      if (stop_.load(std::memory_order_relaxed)) return;
      gen = generation_of(state_.load(std::memory_order_acquire));
      if (gen != seen) break;
      if (i % 64 == 0 && std::chrono::steady_clock::now() >= deadline) break;
      cpu_relax();
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(sleep_mutex_);
      sleepers_.fetch_add(1);
      sleeps_.fetch_add(1, std::memory_order_relaxed);
      // The publisher stores state_ before it reads sleepers_ (both sequentially consistent):
      // either it sees this sleeper and notifies under the mutex, or this check sees its job.
      wake_.wait(lock, [&] { return stop_.load() || generation_of(state_.load()) != seen; });
      sleepers_.fetch_sub(1);
      if (stop_.load()) return;
      gen = generation_of(state_.load());
    }
    seen = gen;
    work_on(gen, true);
  }
}

void work_pool::work_on(uint32_t gen, bool by_worker) {
  uint64_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    if (generation_of(s) != gen || next_of(s) >= pieces_of(s)) return;
    if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) continue;
    // The piece is claimed: the job's fields stay as they are until it is counted done.
    const int64_t begin = next_of(s) * piece_;
    const int64_t end = std::min(n_, begin + piece_);
    try {
      call_(ctx_, begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> guard(sleep_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    if (by_worker) pieces_by_workers_.fetch_add(1, std::memory_order_relaxed);
    done_.fetch_add(1, std::memory_order_acq_rel);
    s = state_.load(std::memory_order_acquire);
  }
}

int64_t work_pool::piece_size(int64_t n, int64_t grain, int64_t threads) {
  // One piece per started grain, as many as the threads share evenly (a multiple of them), at
  // most pieces_per_thread each, all of one size: with grain-sized pieces and a short last one,
  // a loop of 32 items and a grain of 9 went 9, 9, 9, 5, one thread doing 18 while the other
  // did 14; now 8 each.
  const int64_t most = threads * pieces_per_thread;
  const int64_t grains = (n + grain - 1) / grain;
  const int64_t pieces = std::min(most, (grains + threads - 1) / threads * threads);
  return (n + pieces - 1) / pieces;
}

void work_pool::run_erased(int64_t n, int64_t grain, void* ctx, body call) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (n <= grain || inside_pool || threads_.load(std::memory_order_relaxed) <= 1) {
    call(ctx, 0, n);
    return;
  }
  std::unique_lock<std::mutex> lock(run_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) {  // another caller has the workers, or they are being replaced
    call(ctx, 0, n);
    return;
  }
  const int64_t piece = piece_size(n, grain, int64_t(workers_.size() + 1));
  const int64_t pieces = (n + piece - 1) / piece;
  if (pieces <= 1 || workers_.empty()) {
    call(ctx, 0, n);
    return;
  }
  ctx_ = ctx;
  call_ = call;
  n_ = n;
  piece_ = piece;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t gen = generation_of(state_.load(std::memory_order_relaxed)) + 1;
  state_.store((uint64_t{gen} << 32) | (uint64_t(pieces) << 16));
  // Sleeping workers are woken only for a job with a full grain beyond the caller's first piece.
  // A smaller job's second piece is shorter than a wake-up: the caller finishes it first, and the
  // woken worker only takes a core from the server's other threads for its spin.
  if (n >= 2 * grain && sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> guard(sleep_mutex_); }
    wakes_.fetch_add(1, std::memory_order_relaxed);
    wake_.notify_all();
  }
  inside_pool = true;
  work_on(gen, false);
  inside_pool = false;
  // The pieces that workers still hold: short, so poll; yield if a worker is descheduled.
  for (uint32_t i = 0; done_.load(std::memory_order_acquire) < pieces; ++i) {
    if (i < 4096)
      cpu_relax();
    else
      std::this_thread::yield();
  }
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> guard(sleep_mutex_);
    error = std::exchange(error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

work_pool& compute_pool() {
  static work_pool pool(int32_t(std::max(1u, std::thread::hardware_concurrency())));
  return pool;
}

}  // namespace conveyor::kernels
