// Computes the output-format masks of a step's sequences on a thread of its own, so that they are
// ready when the next step's logits are: the model computes while the masks are computed.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "grammar/token_matcher.hpp"

namespace conveyor::pipeline {

/// One background thread that runs `update_mask` on a batch of matchers. `start` hands it a
/// batch (after the previous one was waited for); `wait` returns once the batch is done. The
/// matchers are shared, so a sequence that ends meanwhile leaves its matcher alive until the
/// batch is done. Used by one executor thread.
class mask_worker {
 public:
  mask_worker();
  ~mask_worker();
  mask_worker(const mask_worker&) = delete;
  mask_worker& operator=(const mask_worker&) = delete;

  /// Starts computing the next mask of each of `matchers`. A batch still running is waited for
  /// first.
  void start(std::vector<std::shared_ptr<grammar::token_matcher>> matchers);

  /// Waits until the batch started last is done (at once when there is none).
  void wait();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::shared_ptr<grammar::token_matcher>> batch_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace conveyor::pipeline
