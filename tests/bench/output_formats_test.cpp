// The output format of a share of a bench run's requests: which requests, the flag's limits, and
// how the schema goes into a request.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/output_formats.hpp"

using namespace conveyor::bench;

namespace {

std::string pattern(double fraction, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += constrained({fraction}, i) ? 'x' : '.';
  return out;
}

}  // namespace

TEST(bench_output_formats, the_fraction_is_spread_evenly) {
  EXPECT_EQ(pattern(0, 8), "........");
  EXPECT_EQ(pattern(1, 8), "xxxxxxxx");
  EXPECT_EQ(pattern(0.5, 8), ".x.x.x.x");
  EXPECT_EQ(pattern(0.25, 8), "...x...x");
  EXPECT_EQ(pattern(0.4, 10), "..x.x..x.x");
  for (double f : {0.1, 0.3, 0.5, 0.7}) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < 200; ++i) n += constrained({f}, i) ? 1 : 0;
    EXPECT_EQ(n, std::size_t(200 * f + 0.5)) << f;
  }
}

TEST(bench_output_formats, the_fraction_is_a_share) {
  EXPECT_EQ(check({}), std::nullopt);
  EXPECT_EQ(check({1.0}), std::nullopt);
  EXPECT_EQ(check({0.25}), std::nullopt);
  EXPECT_EQ(check({1.5}), "--json-schema-fraction: must be in [0, 1], got 1.5");
  EXPECT_EQ(check({-0.1}), "--json-schema-fraction: must be in [0, 1], got -0.1");
}

TEST(bench_output_formats, the_schema_goes_in_as_the_server_takes_it) {
  const auto schema = nlohmann::json::parse(bench_json_schema());
  EXPECT_EQ(schema["type"], "object");
  EXPECT_EQ(schema["required"].size(), schema["properties"].size());
  // In the order of the names: the order a body of nlohmann::json (sorted keys) sends.
  auto ordered = nlohmann::ordered_json::parse(bench_json_schema());
  std::string previous;
  for (const auto& item : ordered["properties"].items()) {
    EXPECT_LT(previous, item.key());
    previous = item.key();
  }
  const auto c = bench_constraint();
  EXPECT_EQ(c.type, conveyor::sampling::structured_output::kind::json_schema);
  EXPECT_EQ(nlohmann::json::parse(c.text), schema);
  EXPECT_EQ(c.field, "response_format");
  nlohmann::json body = {{"prompt", "Once"}};
  add_format_to_body(body);
  EXPECT_EQ(body["response_format"],
            nlohmann::json({{"type", "json_schema"},
                            {"json_schema", {{"name", "bench"}, {"schema", schema}}}}));
  EXPECT_EQ(body["prompt"], "Once");
  EXPECT_EQ(to_json({}), nlohmann::json::object());
  EXPECT_EQ(to_json({0.5}),
            nlohmann::json({{"json_schema_fraction", 0.5}, {"json_schema", schema}}));
}
