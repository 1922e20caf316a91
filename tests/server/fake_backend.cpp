#include "fake_backend.hpp"

#include <algorithm>
#include <sstream>

namespace conveyor::server::test {

std::vector<std::string> words_of(const std::string& prompt) {
  std::vector<std::string> words;
  std::istringstream in{prompt};
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string expected_text(const std::string& prompt, int32_t max_tokens) {
  auto words = words_of(prompt);
  std::string text;
  for (std::size_t i = 0; i < words.size() && static_cast<int32_t>(i) < max_tokens; ++i)
    text += (i == 0 ? "" : " ") + words[i];
  return text;
}

struct fake_backend::job : request_handle {
  fake_backend* owner = nullptr;
  completion_request req;
  completion_events events;
  std::atomic<bool> cancel_requested{false};

  void cancel() override {
    if (cancel_requested.exchange(true)) return;
    owner->cancelled_ += 1;
    std::lock_guard<std::mutex> lock{owner->mutex_};
    owner->wake_.notify_all();
  }
};

fake_backend::fake_backend() : fake_backend(settings{}) {}

fake_backend::fake_backend(settings s) : settings_(std::move(s)) {}

fake_backend::~fake_backend() {
  {
    std::lock_guard<std::mutex> lock{mutex_};
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void fake_backend::configure(settings s) {
  std::lock_guard<std::mutex> lock{mutex_};
  settings_ = std::move(s);
}

std::shared_ptr<request_handle> fake_backend::submit(completion_request req,
                                                     completion_events events) {
  submitted_ += 1;
  auto j = std::make_shared<job>();
  j->owner = this;
  j->req = req;
  j->events = std::move(events);
  settings s;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    requests_.push_back(req);
    s = settings_;
  }
  if (s.fail_at_submit) {
    completion_step step;
    step.end = completion_step::end_kind::failed;
    step.code = *s.fail_at_submit;
    step.message = std::string{"fake failure: "} + to_string(*s.fail_at_submit);
    j->events.on_step(std::move(step));
    return j;
  }
  std::lock_guard<std::mutex> lock{mutex_};
  if (s.hold)
    held_.push_back(j);
  else
    threads_.emplace_back([this, j, s] { run(j, s); });
  return j;
}

void fake_backend::run(std::shared_ptr<job> j, settings s) {
  auto words = words_of(j->req.prompt);
  completion_usage usage;
  usage.prompt_tokens = static_cast<int32_t>(words.size());
  usage.cached_tokens = std::min(s.cached_tokens, usage.prompt_tokens);
  auto wait_or_cancel = [&](std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock{mutex_};
    auto ended = [&] { return stopping_ || j->cancel_requested.load(); };
    if (s.paced) {
      wake_.wait(lock, [&] { return ended() || tokens_allowed_ > 0; });
      if (!ended()) --tokens_allowed_;
    } else {
      wake_.wait_for(lock, d, ended);
    }
    return !ended();
  };
  // One token per step and the end alone; with whole_steps, tokens_per_step tokens per step
  // and the end on the step it ends.
  const int32_t per_step = s.whole_steps ? s.tokens_per_step : 1;
  completion_step step;
  int32_t in_step = 0;
  auto send_text = [&] {
    j->events.on_step(std::move(step));
    tokens_sent_ += in_step;
    step = completion_step{};
    in_step = 0;
  };
  auto end = [&] {
    if (!s.whole_steps && in_step > 0) send_text();
    j->events.on_step(std::move(step));
  };
  auto fail = [&](ec code, std::string message) {
    step.end = completion_step::end_kind::failed;
    step.code = code;
    step.message = std::move(message);
    end();
  };
  if (s.fail_prompt && j->req.prompt == *s.fail_prompt) {
    wait_or_cancel(s.token_delay);
    fail(s.fail_code, std::string{"fake failure: "} + to_string(s.fail_code));
    return;
  }
  for (int32_t i = 0; i < j->req.params.max_tokens; ++i) {
    if (words.empty() || (!s.repeat && static_cast<std::size_t>(i) >= words.size())) break;
    if (!wait_or_cancel(s.token_delay)) {
      fail(ec::cancelled, "cancelled");
      return;
    }
    if (i == s.fail_after_tokens) {
      fail(s.fail_code, std::string{"fake failure: "} + to_string(s.fail_code));
      return;
    }
    const auto& w = words[static_cast<std::size_t>(i) % words.size()];
    usage.completion_tokens += 1;
    step.text += i == 0 ? w : " " + w;
    if (++in_step >= per_step) send_text();
  }
  if (s.hang) {
    std::unique_lock<std::mutex> lock{mutex_};
    wake_.wait(lock, [&] { return stopping_ || j->cancel_requested.load(); });
    lock.unlock();
    fail(ec::cancelled, "cancelled");
    return;
  }
  finished_ += 1;
  step.end = completion_step::end_kind::finished;
  step.finish_reason = usage.completion_tokens < j->req.params.max_tokens ? "stop" : "length";
  step.usage = usage;
  end();
}

void fake_backend::collect_metrics(std::function<void(std::string)> reply) {
  std::string text;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    text = settings_.metrics;
  }
  reply(std::move(text));
}

completion_defaults fake_backend::defaults() const {
  completion_defaults d;
  d.max_tokens = 8;
  return d;
}

std::vector<completion_request> fake_backend::requests() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return requests_;
}

void fake_backend::release_held() {
  std::vector<std::shared_ptr<job>> held;
  {
    std::lock_guard<std::mutex> lock{mutex_};
    held.swap(held_);
  }
  for (auto& j : held) {
    completion_step text;
    text.text = "late";
    j->events.on_step(std::move(text));
    completion_step end;
    end.end = completion_step::end_kind::finished;
    end.finish_reason = "stop";
    end.usage = completion_usage{1, 1};
    j->events.on_step(std::move(end));
  }
}

void fake_backend::allow_tokens(int n) {
  {
    std::lock_guard<std::mutex> lock{mutex_};
    tokens_allowed_ += n;
  }
  wake_.notify_all();
}

bool fake_backend::eventually(const std::function<bool()>& pred,
                              std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  return true;
}

}  // namespace conveyor::server::test
