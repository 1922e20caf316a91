#include "bench/http_target.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/process_cpu.hpp"
#include "bench/stream_client.hpp"
#include "common/host_port.hpp"

namespace conveyor::bench {

// -- URL -----------------------------------------------------------------------------------------

expected<target_url> parse_target_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0)
    return make_error(ec::bad_request, "--target " + url + ": expected http://HOST:PORT");
  auto rest = url.substr(scheme.size());
  target_url out;
  auto slash = rest.find('/');
  if (slash != std::string::npos) {
    out.prefix = rest.substr(slash);
    rest.resize(slash);
    while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  }
  if (rest.empty()) return make_error(ec::bad_request, "--target " + url + ": no host");
  if (rest.back() == ']' || rest.find(':') == std::string::npos) {  // no port: the default
    out.host = rest;
    return out;
  }
  auto address = parse_host_port(rest);
  if (!address) return make_error(ec::bad_request, "--target " + url + ": bad host or port");
  out.host = address->host;
  out.port = std::to_string(address->port);
  return out;
}

// -- server-sent events --------------------------------------------------------------------------

stream_event parse_stream_event(const std::string& data) {
  stream_event ev;
  if (data == "[DONE]") {
    ev.done = true;
    return ev;
  }
  auto j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    ev.error = "not JSON: " + data.substr(0, 200);
    return ev;
  }
  if (auto e = j.find("error"); e != j.end()) {
    std::string type;
    if (e->is_object()) {
      ev.error = e->value("message", std::string{"error"});
      type = e->value("type", std::string{});
    } else {
      ev.error = e->dump();
    }
    ev.refused = type == "invalid_request_error" || type == "rate_limit_error";
    return ev;
  }
  if (auto choices = j.find("choices"); choices != j.end() && choices->is_array() &&
                                        !choices->empty() && choices->front().is_object()) {
    const auto& c = choices->front();
    if (auto t = c.find("text"); t != c.end() && t->is_string()) ev.text = t->get<std::string>();
    if (auto d = c.find("delta"); d != c.end() && d->is_object())
      if (auto t = d->find("content"); t != d->end() && t->is_string())
        ev.text = t->get<std::string>();
    if (auto f = c.find("finish_reason"); f != c.end() && f->is_string())
      ev.finish_reason = f->get<std::string>();
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    auto count = [](const nlohmann::json& object, const char* name) -> std::optional<int32_t> {
      if (auto n = object.find(name); n != object.end() && n->is_number_integer())
        return n->get<int32_t>();
      return std::nullopt;
    };
    ev.completion_tokens = count(*u, "completion_tokens");
    ev.prompt_tokens = count(*u, "prompt_tokens");
    if (auto d = u->find("prompt_tokens_details"); d != u->end() && d->is_object())
      ev.cached_tokens = count(*d, "cached_tokens");
  }
  return ev;
}

void completion_stream::on_data(const std::string& data, double now) {
  if (body_.size() < 2000) body_ += data;
  auto ev = parse_stream_event(data);
  if (ev.done) done_ = true;
  if (ev.error && !error_) {
    error_ = ev.error;
    refused_ = ev.refused;
  }
  if (!ev.text.empty()) {
    record_.chunk_times.push_back(now);
    record_.text += ev.text;
    ++text_chunks_;
  }
  if (ev.completion_tokens) usage_tokens_ = ev.completion_tokens;
  if (ev.prompt_tokens) prompt_tokens_ = ev.prompt_tokens;
  if (ev.cached_tokens) cached_tokens_ = ev.cached_tokens;
  if (ev.finish_reason) finished_ = true;
}

request_record completion_stream::finish(unsigned http_status, const std::string& transport_error,
                                         double now) {
  record_.end = now;
  record_.output_tokens = usage_tokens_ ? *usage_tokens_ : text_chunks_;
  record_.prompt_tokens = prompt_tokens_;
  record_.cached_tokens = cached_tokens_;
  if (http_status != 200) {
    // The body of an error response is one JSON object, not events.
    auto ev = parse_stream_event(body_);
    record_.message = "HTTP " + std::to_string(http_status) + (ev.error ? ": " + *ev.error : "");
    record_.status =
        http_status >= 400 && http_status < 500 ? request_status::rejected : request_status::failed;
  } else if (error_) {
    record_.message = *error_;
    record_.status = refused_ ? request_status::rejected : request_status::failed;
  } else if (!transport_error.empty() && !done_) {
    record_.message = transport_error;
    record_.status = request_status::failed;
  } else if (!done_ && !finished_) {
    record_.message = "the stream ended without [DONE]";
    record_.status = request_status::failed;
  } else {
    record_.status = request_status::completed;
  }
  return record_;
}

// -- the driver ----------------------------------------------------------------------------------

std::vector<request_record> run_target(const workload& requests, const target_options& options,
                                       run_progress& progress, run_timing& timing) {
  using clock_type = client_loops::clock_type;
  std::vector<request_record> records(requests.size());
  std::mutex mutex;
  std::condition_variable all_ended;
  std::size_t ended = 0;
  client_loops loops{options};
  const double cpu0 = process_cpu_seconds();
  const auto t0 = clock_type::now();
  auto last_end = t0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto& w = requests[i];
    const auto scheduled = t0 + std::chrono::duration_cast<clock_type::duration>(
                                    std::chrono::duration<double>(w.arrival_s));
    std::this_thread::sleep_until(scheduled);
    nlohmann::json body = {{"prompt", w.prompt},
                           {"max_tokens", w.max_tokens},
                           {"stream", true},
                           {"stream_options", {{"include_usage", true}}}};
    if (!options.model.empty()) body["model"] = options.model;
    add_to_body(options.sampling, body);
    if (constrained(options.formats, i)) add_format_to_body(body);
    loops.post(i, "/v1/completions", body.dump(), scheduled, [&, i](request_record record) {
      const auto now = clock_type::now();
      std::lock_guard<std::mutex> guard{mutex};
      records[i] = std::move(record);
      last_end = std::max(last_end, now);
      ++ended;
      ++progress.ended;
      all_ended.notify_all();
    });
    ++progress.sent;
  }
  {
    std::unique_lock<std::mutex> guard{mutex};
    all_ended.wait(guard, [&] { return ended == requests.size(); });
  }
  loops.join();
  for (std::size_t i = 0; i < records.size(); ++i)
    records[i].constrained = constrained(options.formats, i);
  timing.cpu_s = process_cpu_seconds() - cpu0;
  timing.wall_s = std::chrono::duration<double>(last_end - t0).count();
  return records;
}

}  // namespace conveyor::bench
