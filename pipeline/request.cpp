#include "pipeline/request.hpp"

#include <algorithm>

namespace conveyor {

deadline_left left_of(stamp deadline, stamp now) {
  if (deadline == 0) return {};
  return {true, deadline - now};
}

stamp deadline_from(const deadline_left& left, stamp now) {
  if (!left.set) return 0;
  // 0 means "no deadline": a deadline that lands on it (a clock near its start) is one later.
  return std::max<stamp>(now + left.nanoseconds, 1);
}

pipeline::request_timing timing_of(const request_result& r) {
  pipeline::request_timing t;
  t.outcome = r.how;
  t.reason = r.reason;
  t.arrival = to_time_point(r.times.arrival);
  if (r.times.tokenized) t.tokenized = to_time_point(r.times.tokenized);
  if (r.times.queued) t.queued = to_time_point(r.times.queued);
  if (r.times.admitted) t.admitted = to_time_point(r.times.admitted);
  if (r.times.first_token) t.first_token = to_time_point(r.times.first_token);
  t.finished = to_time_point(r.times.finished);
  t.prompt_tokens = size_t(r.prompt_tokens);
  t.output_tokens = size_t(r.completion_tokens);
  t.cache_queried_tokens = size_t(r.cache_queried_tokens);
  t.cached_tokens = size_t(r.cached_tokens);
  return t;
}

request_result make_failure(request_id id, outcome how, ec code, std::string message,
                            const request_times& times, int32_t prompt_tokens,
                            int32_t completion_tokens) {
  request_result r;
  r.id = id;
  r.how = how;
  r.code = code;
  r.message = std::move(message);
  r.times = times;
  r.times.finished = now_stamp();
  r.prompt_tokens = prompt_tokens;
  r.completion_tokens = completion_tokens;
  return r;
}

}  // namespace conveyor
