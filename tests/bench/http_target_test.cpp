// The --target client: URL parsing, stream interpretation, and replays against a small canned
// server on a real socket (streams whole, chunked a byte at a time, refused), against a closed
// port and against a listener that never answers.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/http_target.hpp"
#include "tests/bench/canned_server.hpp"

using namespace conveyor::bench;
using conveyor::bench::test::canned_server;

TEST(bench_http, parse_target_url) {
  auto u = parse_target_url("http://127.0.0.1:8080");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "8080");
  EXPECT_EQ(u->prefix, "");
  u = parse_target_url("http://example.org/api/");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->prefix, "/api");
  EXPECT_FALSE(parse_target_url("https://x:1"));
  EXPECT_FALSE(parse_target_url("http://x:port"));
  EXPECT_FALSE(parse_target_url("http://:80"));
}

TEST(bench_http, completion_stream_outcomes) {
  completion_stream ok;
  ok.on_data(R"({"choices":[{"text":"Once","finish_reason":null}]})", 0.1);
  ok.on_data(R"({"choices":[{"text":"","finish_reason":null}]})", 0.15);
  ok.on_data(R"({"choices":[{"text":" upon","finish_reason":"length"}]})", 0.2);
  ok.on_data(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}})", 0.21);
  ok.on_data("[DONE]", 0.22);
  auto r = ok.finish(200, "", 0.25);
  EXPECT_EQ(r.status, request_status::completed);
  EXPECT_EQ(r.chunk_times, (std::vector<double>{0.1, 0.2}));  // the empty chunk is no token
  EXPECT_EQ(r.output_tokens, 2);
  EXPECT_DOUBLE_EQ(r.end, 0.25);

  completion_stream full;
  auto q = full.finish(429, "", 0.01);
  EXPECT_EQ(q.status, request_status::rejected);
  completion_stream err;
  err.on_data(R"({"error":{"message":"queue full","type":"rate_limit_error"}})", 0.1);
  EXPECT_EQ(err.finish(200, "", 0.1).status, request_status::rejected);
  completion_stream lost;
  lost.on_data(R"({"error":{"message":"executor lost","type":"server_error"}})", 0.1);
  EXPECT_EQ(lost.finish(200, "", 0.1).status, request_status::failed);
  completion_stream cut;
  cut.on_data(R"({"choices":[{"text":"a"}]})", 0.1);
  EXPECT_EQ(cut.finish(200, "end of stream", 0.2).status, request_status::failed);
  EXPECT_EQ(completion_stream{}.finish(500, "", 0.1).status, request_status::failed);
}

TEST(bench_http, replays_a_workload_in_open_loop) {
  canned_server server;
  workload w;
  for (int i = 0; i < 12; ++i)
    w.push_back({"r" + std::to_string(i), 0.01 * i, i == 5 ? "full" : "Once", 3});
  target_options o;
  o.url = *parse_target_url("http://127.0.0.1:" + std::to_string(server.port()));
  run_progress progress;
  run_timing timing;
  auto records = run_target(w, o, progress, timing);
  ASSERT_EQ(records.size(), w.size());
  EXPECT_EQ(progress.sent.load(), w.size());
  EXPECT_EQ(progress.ended.load(), w.size());
  auto s = summarize("target", 100, records, timing.wall_s);
  EXPECT_EQ(s.completed, 11u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.failed, 0u);
  EXPECT_EQ(s.output_tokens, 33u);
  EXPECT_EQ(s.itl.count, 22u);
  // Open loop: the last request starts 0.11 s after the first, however fast the server answers.
  EXPECT_GE(timing.wall_s, 0.11);
  // The client's CPU over the run: measured (not NaN), and some, for 12 connections' work.
  EXPECT_GT(timing.cpu_s, 0.0);
  // Each chunk is stamped once, in order, after its request's start and not after its end
  // (how chunk times become ITL is completion_stream_outcomes' business, with exact times).
  for (const auto& r : records) {
    if (r.status != request_status::completed) continue;
    ASSERT_EQ(r.chunk_times.size(), 3u);
    EXPECT_GE(r.chunk_times.front(), 0.0);
    EXPECT_TRUE(std::is_sorted(r.chunk_times.begin(), r.chunk_times.end()));
    EXPECT_LE(r.chunk_times.back(), r.end);
  }
}

TEST(bench_http, a_share_of_the_requests_asks_for_the_schema) {
  canned_server server;
  workload w;
  for (int i = 0; i < 4; ++i) w.push_back({"f" + std::to_string(i), 0.01 * i, "Once", 3});
  target_options o;
  o.url = *parse_target_url(server.url());
  o.formats.json_schema_fraction = 0.5;
  run_progress progress;
  run_timing timing;
  auto records = run_target(w, o, progress, timing);
  ASSERT_EQ(records.size(), w.size());
  const auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), w.size());
  std::size_t with_format = 0;
  for (const auto& text : bodies) {
    const auto body = nlohmann::json::parse(text);
    if (!body.contains("response_format")) continue;
    ++with_format;
    EXPECT_EQ(body["response_format"]["type"], "json_schema");
  }
  EXPECT_EQ(with_format, 2u);
  for (std::size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].status, request_status::completed) << records[i].message;
    EXPECT_EQ(records[i].constrained, i % 2 == 1) << i;
  }
}

TEST(bench_http, reads_chunked_streams_that_arrive_a_byte_at_a_time) {
  canned_server server;
  workload w;
  for (int i = 0; i < 4; ++i) w.push_back({"c" + std::to_string(i), 0.0, "chunked", 3});
  target_options o;
  o.url = *parse_target_url(server.url());
  run_progress progress;
  run_timing timing;
  auto records = run_target(w, o, progress, timing);
  ASSERT_EQ(records.size(), w.size());
  for (const auto& r : records) {
    EXPECT_EQ(r.status, request_status::completed) << r.message;
    EXPECT_EQ(r.output_tokens, 3);
    EXPECT_EQ(r.chunk_times.size(), 3u);
  }
}

TEST(bench_http, a_server_that_is_not_there_fails_each_request_naming_why) {
  // A port nobody listens on: the one of a listener closed at once.
  uint16_t port = 0;
  {
    canned_server closed;
    port = closed.port();
  }
  workload w;
  for (int i = 0; i < 3; ++i) w.push_back({"r" + std::to_string(i), 0.0, "Once", 3});
  target_options o;
  o.url = *parse_target_url("http://127.0.0.1:" + std::to_string(port));
  run_progress progress;
  run_timing timing;
  auto records = run_target(w, o, progress, timing);
  ASSERT_EQ(records.size(), w.size());
  EXPECT_EQ(progress.ended.load(), w.size());
  for (const auto& r : records) {
    EXPECT_EQ(r.status, request_status::failed);
    EXPECT_NE(r.message.find("cannot connect"), std::string::npos) << r.message;
  }
}

TEST(bench_http, a_server_that_never_answers_fails_each_request_at_its_timeout) {
  // A listening socket nobody accepts from: connecting and writing succeed (the kernel queues
  // them), and no response ever comes.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  workload w;
  for (int i = 0; i < 3; ++i) w.push_back({"r" + std::to_string(i), 0.0, "Once", 3});
  target_options o;
  o.url = *parse_target_url("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)));
  o.timeout_s = 0.2;
  run_progress progress;
  run_timing timing;
  auto records = run_target(w, o, progress, timing);
  ::close(fd);
  ASSERT_EQ(records.size(), w.size());
  for (const auto& r : records) {
    EXPECT_EQ(r.status, request_status::failed);
    EXPECT_EQ(r.message, "timed out");
  }
  EXPECT_GE(timing.wall_s, 0.2);
}
