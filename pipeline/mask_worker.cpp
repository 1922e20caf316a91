#include "pipeline/mask_worker.hpp"

namespace conveyor::pipeline {

mask_worker::mask_worker() : thread_([this] { run(); }) {}

mask_worker::~mask_worker() {
  {
    std::lock_guard<std::mutex> lock{mutex_};
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void mask_worker::start(std::vector<std::shared_ptr<grammar::token_matcher>> matchers) {
  wait();
  if (matchers.empty()) return;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    batch_ = std::move(matchers);
    busy_ = true;
  }
  changed_.notify_all();
}

void mask_worker::wait() {
  std::unique_lock<std::mutex> lock{mutex_};
  changed_.wait(lock, [&] { return !busy_; });
}

void mask_worker::run() {
  std::unique_lock<std::mutex> lock{mutex_};
  for (;;) {
    changed_.wait(lock, [&] { return busy_ || stopping_; });
    if (stopping_) return;
    auto batch = std::move(batch_);
    lock.unlock();
    // A failure is kept in the matcher (failure()); the sampler ends that sequence.
    for (auto& m : batch) m->update_mask();
    batch.clear();
    lock.lock();
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace conveyor::pipeline
