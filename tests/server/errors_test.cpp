// The one mapping from Conveyor's error codes to HTTP statuses and OpenAI error types.
#include "server/errors.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"

namespace conveyor::server {

namespace {

void expect_mapping(ec code, unsigned status, const std::string& type, int32_t retry_after) {
  auto info = to_http_error(code);
  EXPECT_EQ(info.status, status) << to_string(code);
  EXPECT_EQ(std::string{info.type}, type) << to_string(code);
  EXPECT_EQ(info.retry_after_s, retry_after) << to_string(code);
}

}  // namespace

TEST(server_errors, client_mistakes_are_400) {
  expect_mapping(ec::bad_request, 400, "invalid_request_error", 0);
  expect_mapping(ec::prompt_too_long, 400, "invalid_request_error", 0);
}

TEST(server_errors, a_full_queue_is_429_with_retry_after) {
  expect_mapping(ec::rejected_queue_full, 429, "rate_limit_error", 1);
}

TEST(server_errors, shutdown_deadline_and_cancel) {
  expect_mapping(ec::shutting_down, 503, "server_error", 1);
  expect_mapping(ec::expired, 504, "timeout_error", 0);
  expect_mapping(ec::cancelled, 499, "cancelled_error", 0);
}

TEST(server_errors, server_faults_are_500) {
  for (auto code :
       {ec::executor_lost, ec::internal, ec::model_failure, ec::bad_file, ec::bad_config, ec::none})
    expect_mapping(code, 500, "server_error", 0);
}

}  // namespace conveyor::server
