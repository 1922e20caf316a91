// The HTTP server's option defaults are the configuration's: the shipped config/conveyor.toml
// (a file outside the code) describes what a server_options{} holds.
#include "server/http_server.hpp"

#include <gtest/gtest.h>

#include "config/config.hpp"

namespace conveyor::server {

TEST(server_options, defaults_are_the_shipped_configurations_server_section) {
  auto shipped = config::load_file(std::string{CONVEYOR_SOURCE_DIR} + "/config/conveyor.toml");
  ASSERT_TRUE(shipped) << message_of(shipped.error());
  const auto& s = shipped->server;
  const server_options o;
  EXPECT_EQ(o.host, s.host);
  EXPECT_EQ(o.port, s.port);
  EXPECT_EQ(o.io_threads, s.io_threads) << "once 2 here and 1 in the configuration";
  EXPECT_EQ(int64_t(o.max_body_bytes), s.max_body_bytes);
  EXPECT_EQ(int64_t(o.max_header_bytes), s.max_header_bytes);
  EXPECT_EQ(o.idle_timeout, std::chrono::seconds{s.idle_timeout_s});
  EXPECT_EQ(int64_t(o.max_connections), s.max_connections);
  EXPECT_EQ(o.drain_timeout, std::chrono::seconds{s.drain_timeout_s})
      << "once 30 s here and 10 s in the configuration";
  EXPECT_EQ(int64_t(o.max_stream_buffer_bytes), s.max_stream_buffer_bytes);
  EXPECT_EQ(int64_t(o.stream_interval), s.stream_interval);
  EXPECT_EQ(o.stream_delay, std::chrono::milliseconds{s.stream_delay_ms});
  EXPECT_EQ(int64_t(o.max_prompts), s.max_prompts);
  EXPECT_EQ(int64_t(o.max_n), s.max_n);
}

TEST(server_options, request_defaults_are_the_shipped_configurations_generation_section) {
  auto shipped = config::load_file(std::string{CONVEYOR_SOURCE_DIR} + "/config/conveyor.toml");
  ASSERT_TRUE(shipped) << message_of(shipped.error());
  const auto& g = shipped->generation;
  const completion_defaults d;
  const completion_request r;
  EXPECT_EQ(d.max_tokens, g.max_tokens);
  EXPECT_EQ(d.temperature, g.temperature);
  EXPECT_EQ(d.top_p, g.top_p);
  EXPECT_EQ(d.top_k, g.top_k);
  EXPECT_EQ(r.params.max_tokens, g.max_tokens);
  EXPECT_EQ(r.params.temperature, g.temperature);
  EXPECT_EQ(r.params.top_p, g.top_p);
  EXPECT_EQ(r.params.top_k, g.top_k);
}

}  // namespace conveyor::server
