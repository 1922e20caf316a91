// The sampling fields of a bench run: the request limits named by flag, and the JSON body.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/sampling_fields.hpp"

using namespace conveyor::bench;

TEST(bench_sampling, limits_are_a_requests_and_name_the_flag) {
  EXPECT_EQ(check({}), std::nullopt);
  EXPECT_EQ(check({0.0, 1.0, 0, true}), std::nullopt);
  EXPECT_EQ(check({2.0, 0.5, 40, false}), std::nullopt);
  EXPECT_EQ(check({2.5, {}, {}, false}), "--temperature: must be between 0 and 2, got 2.5");
  EXPECT_EQ(check({-0.1, {}, {}, false}), "--temperature: must be between 0 and 2, got -0.1");
  EXPECT_EQ(check({{}, 0.0, {}, false}), "--top-p: must be greater than 0 and at most 1, got 0");
  EXPECT_EQ(check({{}, 1.5, {}, false}), "--top-p: must be greater than 0 and at most 1, got 1.5");
  EXPECT_EQ(check({{}, {}, -1, false}), "--top-k: must be at least 0, got -1");
}

TEST(bench_sampling, body_carries_the_set_fields_and_temperature_always) {
  nlohmann::json body = nlohmann::json::object();
  add_to_body({}, body);
  EXPECT_EQ(body, nlohmann::json({{"temperature", 1.0}}));
  body = nlohmann::json::object();
  add_to_body({0.0, 0.9, 40, true}, body);
  EXPECT_EQ(body, nlohmann::json(
                      {{"temperature", 0.0}, {"top_p", 0.9}, {"top_k", 40}, {"ignore_eos", true}}));
  EXPECT_EQ(to_json({}), nlohmann::json::object());
  EXPECT_EQ(to_json({{}, {}, 5, false}), nlohmann::json({{"top_k", 5}}));
}
