#include "test_client.hpp"

#include <cstdio>

#include "client/sse_parser.hpp"

namespace conveyor::server::test {

namespace {

client::connection_options with_receive_buffer(int rcvbuf) {
  client::connection_options options;
  options.receive_buffer = rcvbuf;
  return options;
}

}  // namespace

test_client::test_client(uint16_t port, int rcvbuf)
    : http_connection("127.0.0.1", std::to_string(port), with_receive_buffer(rcvbuf)) {}

std::vector<nlohmann::json> sse_events(const std::string& body) {
  std::vector<nlohmann::json> events;
  client::sse_parser parser{[&](const std::string& data) {
    if (data == "[DONE]")
      events.emplace_back("[DONE]");
    else
      events.push_back(nlohmann::json::parse(data, nullptr, false));
  }};
  parser.feed(body);
  return events;
}

std::string run_command(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return out;
  char chunk[4096];
  while (auto n = std::fread(chunk, 1, sizeof(chunk), pipe)) out.append(chunk, n);
  ::pclose(pipe);
  return out;
}

}  // namespace conveyor::server::test
