// When a sink runs its request again: lost before its first chunk, not cancelled, reruns left.
#include "pipeline/rerun_tracker.hpp"

#include <utility>

namespace conveyor::pipeline {

rerun_tracker::rerun_tracker(generate_request request, int32_t max_reruns)
    : request_(std::move(request)), max_reruns_(max_reruns) {}

rerun_verdict rerun_tracker::on_chunk(const token_chunk& chunk) {
  if (chunk.id != request_.id) return rerun_verdict::ignore;
  heard_ = true;
  return rerun_verdict::deliver;
}

rerun_verdict rerun_tracker::on_result(const request_result& result) {
  if (result.id != request_.id) return rerun_verdict::ignore;
  const bool lost_unheard = result.how == outcome::failed && result.code == ec::executor_lost &&
                            !heard_ && result.tail.empty();
  if (lost_unheard && !cancelled_ && reruns_ < max_reruns_) return rerun_verdict::rerun;
  return rerun_verdict::deliver;
}

generate_request rerun_tracker::rerun(request_id id) {
  ++reruns_;
  request_.id = id;
  return request_;
}

}  // namespace conveyor::pipeline
