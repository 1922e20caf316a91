// The threads that share the CPU network's loops: a fixed pool whose workers wait briefly for the
// next loop of a step and then sleep, and which hands out small pieces of a loop on demand.
//
// It replaces OpenMP's fork and join (at::parallel_for). libgomp's idle workers spin for
// milliseconds after every loop, taking a core from the server's I/O thread, the actors and a
// client on the same machine; and its static split makes the whole loop wait for a worker the
// kernel has descheduled. Here a worker that finds no loop within `spin` sleeps on a condition
// variable, and the caller takes pieces like any worker, so a descheduled worker delays at most
// the one piece it holds (docs/benchmarks.md).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace conveyor::kernels {

/// A pool of `threads - 1` worker threads; the thread that calls `run` is the last one.
/// `run` may be called from any thread. A call made while another is running (a second CPU
/// executor) or from inside a piece runs on its caller alone, so calls never wait for each other.
class work_pool {
 public:
  /// How long an idle worker polls for the next loop before it sleeps: longer than the gap
  /// between two loops of a step, shorter than the gap between steps.
  static constexpr std::chrono::microseconds default_spin{50};

  /// Pieces per thread a loop is cut into (at most), so that pieces balance across threads.
  static constexpr int64_t pieces_per_thread = 4;

  explicit work_pool(int32_t threads, std::chrono::microseconds spin = default_spin);
  ~work_pool();

  work_pool(const work_pool&) = delete;
  work_pool& operator=(const work_pool&) = delete;

  /// Threads that run pieces, the caller included.
  int32_t threads() const { return threads_.load(); }

  /// Stops the workers and starts `threads - 1` new ones; waits for a running call to end.
  void resize(int32_t threads);

  /// Calls f(begin, end) over [0, n): on the caller alone when n <= grain, else in pieces of
  /// `piece_size(n, grain, threads())` items; returns when every piece has run. The first
  /// exception a piece throws is rethrown here, after all pieces ended.
  /// Workers that are polling take pieces of any split loop; sleeping ones are woken only when
  /// n >= 2 * grain, so that there is a full grain for them beyond the caller's first piece.
  template <class F>
  void run(int64_t n, int64_t grain, F&& f) {
    using fn = std::remove_reference_t<F>;
    run_erased(n, grain, const_cast<void*>(static_cast<const void*>(&f)),
               [](void* ctx, int64_t begin, int64_t end) { (*static_cast<fn*>(ctx))(begin, end); });
  }

  /// The items per piece of a split loop of `n` items on `threads` threads: one piece per
  /// started grain, rounded up to a multiple of `threads` and at most pieces_per_thread each,
  /// cut into equal sizes (the last may be shorter by less than one item per piece).
  static int64_t piece_size(int64_t n, int64_t grain, int64_t threads);

  /// Times a worker went to sleep for lack of work.
  uint64_t sleeps() const { return sleeps_.load(); }

  /// Times a call woke sleeping workers.
  uint64_t wakes() const { return wakes_.load(); }

  /// Workers asleep now (tests observe that idle workers sleep).
  int32_t sleeping() const { return sleepers_.load(); }

  /// Pieces run by the workers (not the caller).
  uint64_t pieces_by_workers() const { return pieces_by_workers_.load(); }

 private:
  using body = void (*)(void*, int64_t, int64_t);

  void run_erased(int64_t n, int64_t grain, void* ctx, body call);

  // Claims and runs pieces of the job of generation `gen` until none is left; a worker counts
  // its pieces in pieces_by_workers_ before it counts them done.
  void work_on(uint32_t gen, bool by_worker);

  void worker_loop(uint32_t seen);
  void start(int32_t threads);
  void stop_workers();

  // -- the current job: written by the caller before it publishes `state_`, read by whoever
  //    claims a piece of it; stable until the caller has seen every piece done ------------------
  void* ctx_ = nullptr;
  body call_ = nullptr;
  int64_t n_ = 0;
  int64_t piece_ = 1;
  std::exception_ptr error_;  // guarded by sleep_mutex_

  // generation (32 bits) | pieces of the job (16) | next unclaimed piece (16): a piece is claimed
  // by a compare-and-swap that also checks the generation, so a late worker never takes a piece
  // of a newer job.
  std::atomic<uint64_t> state_{0};
  std::atomic<int64_t> done_{0};  // pieces of the current job finished

  std::mutex run_mutex_;  // held by the one call that uses the workers
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<int32_t> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::chrono::microseconds spin_;
  std::atomic<uint64_t> sleeps_{0};
  std::atomic<uint64_t> wakes_{0};
  std::atomic<uint64_t> pieces_by_workers_{0};
  std::atomic<int32_t> threads_{1};
  std::vector<std::thread> workers_;  // changed only under run_mutex_
};

/// The process-wide pool of the CPU network (created on first use with one thread per core).
work_pool& compute_pool();

/// compute_pool().run(n, grain, f).
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  compute_pool().run(n, grain, std::forward<F>(f));
}

}  // namespace conveyor::kernels
