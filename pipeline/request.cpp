#include "pipeline/request.hpp"

namespace conveyor {

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
