// Registration of the pipeline's network message types.
#include "pipeline/message_types.hpp"

#include <caf/actor_system_config.hpp>

#include "pipeline/actors.hpp"

namespace conveyor {

void add_message_types(caf::actor_system_config& cfg) {
  // Names are part of the wire protocol: server and workers must agree on them.
  cfg.add_message_type<generate_request>("conveyor::generate_request");
  cfg.add_message_type<sequence_request>("conveyor::sequence_request");
  cfg.add_message_type<sampling::sampling_params>("conveyor::sampling::sampling_params");
  cfg.add_message_type<request_times>("conveyor::request_times");
  cfg.add_message_type<token_chunk>("conveyor::token_chunk");
  cfg.add_message_type<request_result>("conveyor::request_result");
  cfg.add_message_type<executor_report>("conveyor::executor_report");
  cfg.add_message_type<pipeline_status>("conveyor::pipeline_status");
  cfg.add_message_type<work_item>("conveyor::work_item");
  cfg.add_message_type<std::vector<work_item>>("std::vector<conveyor::work_item>");
  cfg.add_message_type<outcome>("conveyor::outcome");
  cfg.add_message_type<finish_reason>("conveyor::finish_reason");
  cfg.add_message_type<ec>("conveyor::ec");
  cfg.add_message_type<sink_actor>("conveyor::sink_actor");
  cfg.add_message_type<executor_actor>("conveyor::executor_actor");
  cfg.add_message_type<batcher_actor>("conveyor::batcher_actor");
  cfg.add_message_type<batcher_ref>("conveyor::batcher_ref");
  cfg.add_message_type<pipeline_actor>("conveyor::pipeline_actor");
  cfg.add_message_type<worker_actor>("conveyor::worker_actor");
}

}  // namespace conveyor
