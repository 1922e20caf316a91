#include "bench/chat_target.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "bench/process_cpu.hpp"
#include "bench/stream_client.hpp"

namespace conveyor::bench {

nlohmann::json turn_messages(const conversation& c, const std::vector<std::string>& replies) {
  auto messages = nlohmann::json::array();
  if (!c.system_prompt.empty())
    messages.push_back({{"role", "system"}, {"content", c.system_prompt}});
  for (std::size_t k = 0; k < replies.size(); ++k) {
    messages.push_back({{"role", "user"}, {"content", c.user_messages.at(k)}});
    messages.push_back({{"role", "assistant"}, {"content", replies[k]}});
  }
  messages.push_back({{"role", "user"}, {"content", c.user_messages.at(replies.size())}});
  return messages;
}

std::string chat_request_body(const conversation& c, const std::vector<std::string>& replies,
                              const target_options& options) {
  nlohmann::json body = {{"messages", turn_messages(c, replies)},
                         {"max_tokens", c.max_tokens},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  if (!options.model.empty()) body["model"] = options.model;
  add_to_body(options.sampling, body);
  return body.dump();
}

namespace {

using clock_type = client_loops::clock_type;

/// What a run shares between the threads of its event loops and the thread that starts it.
struct chat_run {
  chat_run(const chat_workload& w, const target_options& o, double think, run_progress& p,
           client_loops& l)
      : conversations(w),
        options(o),
        think_time(
            std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(think))),
        progress(p),
        loops(l),
        records(turns_of(w)),
        first_record(w.size()),
        replies(w.size()) {
    for (std::size_t i = 0, next = 0; i < w.size(); ++i) {
      first_record[i] = next;
      next += w[i].user_messages.size();
    }
  }

  const chat_workload& conversations;
  const target_options& options;
  const clock_type::duration think_time;
  run_progress& progress;
  client_loops& loops;
  // Guards the records, the count and the last end; replies[i] is only touched on conversation
  // i's lane, one turn at a time.
  std::mutex mutex;
  std::condition_variable all_ended;
  std::vector<request_record> records;
  std::size_t ended = 0;
  clock_type::time_point last_end{};
  std::vector<std::size_t> first_record;
  std::vector<std::vector<std::string>> replies;

  /// Sends the next turn of conversation `i`, due at `scheduled` (its times count from there).
  void send(std::size_t i, clock_type::time_point scheduled) {
    loops.post(i, "/v1/chat/completions", chat_request_body(conversations[i], replies[i], options),
               scheduled, [this, i](request_record record) { answered(i, std::move(record)); });
    ++progress.sent;
  }

  /// A turn of conversation `i` ended (on its lane's thread): records it, then sends the next
  /// turn with the reply, or fails the turns left when this one did not complete.
  void answered(std::size_t i, request_record record) {
    const auto& c = conversations[i];
    const std::size_t turn = replies[i].size();  // 0-based
    const bool completed = record.status == request_status::completed;
    std::string reply = record.text;
    record.turn = int32_t(turn + 1);
    std::size_t newly_ended = 1;
    {
      std::lock_guard<std::mutex> guard{mutex};
      records[first_record[i] + turn] = std::move(record);
      if (!completed)
        for (std::size_t k = turn + 1; k < c.user_messages.size(); ++k) {
          auto& skipped = records[first_record[i] + k];
          skipped.status = request_status::failed;
          skipped.turn = int32_t(k + 1);
          skipped.message = "not sent: turn " + std::to_string(turn + 1) + " did not complete";
          ++newly_ended;
        }
      last_end = std::max(last_end, clock_type::now());
      ended += newly_ended;
      progress.ended += newly_ended;
    }
    all_ended.notify_all();
    if (!completed || turn + 1 == c.user_messages.size()) return;
    replies[i].push_back(std::move(reply));
    const auto due = clock_type::now() + think_time;
    if (think_time == clock_type::duration::zero())
      send(i, due);
    else
      loops.run_at(i, due, [this, i, due] { send(i, due); });
  }
};

}  // namespace

std::vector<request_record> run_chat_target(const chat_workload& conversations,
                                            const target_options& options, double think_time_s,
                                            run_progress& progress, run_timing& timing) {
  client_loops loops{options};
  auto run = std::make_unique<chat_run>(conversations, options, think_time_s, progress, loops);
  const std::size_t total = run->records.size();
  const double cpu0 = process_cpu_seconds();
  const auto t0 = clock_type::now();
  run->last_end = t0;
  for (std::size_t i = 0; i < conversations.size(); ++i) {
    const auto scheduled = t0 + std::chrono::duration_cast<clock_type::duration>(
                                    std::chrono::duration<double>(conversations[i].arrival_s));
    std::this_thread::sleep_until(scheduled);
    run->send(i, scheduled);
  }
  {
    std::unique_lock<std::mutex> guard{run->mutex};
    run->all_ended.wait(guard, [&] { return run->ended == total; });
  }
  loops.join();
  timing.cpu_s = process_cpu_seconds() - cpu0;
  timing.wall_s = std::chrono::duration<double>(run->last_end - t0).count();
  return std::move(run->records);
}

}  // namespace conveyor::bench
