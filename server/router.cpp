// Routing and the answers that need no backend round trip.
#include "server/router.hpp"

#include "common/error.hpp"

namespace conveyor::server::detail {

std::variant<endpoint, error_answer> route(http::verb method, std::string_view method_name,
                                           std::string_view target) {
  auto path = target.substr(0, target.find('?'));
  auto only = [&](endpoint e, http::verb allowed,
                  const char* allow) -> std::variant<endpoint, error_answer> {
    if (method == allowed) return e;
    error_answer answer;
    answer.status = 405;
    answer.message = "method " + std::string{method_name} + " is not allowed on " +
                     std::string{path};
    answer.code = "method_not_allowed";
    answer.extra = {{"Allow", allow}};
    return answer;
  };
  if (path == "/v1/completions") return only(endpoint::completions, http::verb::post, "POST");
  if (path == "/v1/chat/completions")
    return only(endpoint::chat_completions, http::verb::post, "POST");
  if (path == "/v1/models") return only(endpoint::models, http::verb::get, "GET");
  if (path == "/health") return only(endpoint::health, http::verb::get, "GET");
  if (path == "/metrics") return only(endpoint::metrics, http::verb::get, "GET");
  if (path == "/tokenize") return only(endpoint::tokenize, http::verb::post, "POST");
  if (path == "/detokenize") return only(endpoint::detokenize, http::verb::post, "POST");
  error_answer answer;
  answer.status = 404;
  answer.message = "no such endpoint: " + std::string{path};
  answer.code = "not_found";
  return answer;
}

std::pair<unsigned, std::string> health_answer(bool ready, bool draining) {
  if (draining) return {503, R"({"status":"draining"})"};
  if (!ready) return {503, R"({"status":"loading"})"};
  return {200, R"({"status":"ok"})"};
}

error_answer chat_refused(std::string_view refusal) {
  error_answer answer;
  answer.message = std::string{refusal};
  answer.code = to_string(ec::bad_request);
  return answer;
}

std::variant<completion_body, error_answer> read_completion_request(std::string_view body,
                                                                    api_kind kind,
                                                                    const request_context& ctx) {
  if (kind == api_kind::chat_completions && !ctx.chat_template && !ctx.tool_chat_template)
    return chat_refused(ctx.chat_refusal);
  auto parsed = kind == api_kind::chat_completions
                    ? parse_chat_body(body, ctx.defaults,
                                      chat_templates{ctx.chat_template, ctx.tool_chat_template,
                                                     ctx.chat_refusal},
                                      ctx.max_n, ctx.tool_call_parser)
                    : parse_completion_body(body, ctx.defaults, ctx.max_prompts, ctx.max_n);
  if (auto* err = std::get_if<body_error>(&parsed)) {
    error_answer answer;
    answer.message = std::move(err->message);
    answer.param = std::move(err->param);
    answer.code = to_string(ec::bad_request);
    return answer;
  }
  auto& request = std::get<completion_body>(parsed);
  if (request.model && *request.model != ctx.served_model) {
    // OpenAI's answer to a model it does not have.
    error_answer answer;
    answer.status = 404;
    answer.message = "The model `" + *request.model + "` does not exist";
    answer.param = "model";
    answer.code = "model_not_found";
    return answer;
  }
  return std::move(request);
}

}  // namespace conveyor::server::detail
