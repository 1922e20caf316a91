// The one writer of the Prometheus text format, against the exposition format's rules.
#include "common/prometheus.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

using namespace conveyor::prometheus;

TEST(prometheus, values_are_written_as_go_parses_them) {
  EXPECT_EQ(format_value(3), "3");
  EXPECT_EQ(format_value(-2), "-2");
  EXPECT_EQ(format_value(0.25), "0.25");
  EXPECT_EQ(format_value(1e-7), "1e-07");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
}

TEST(prometheus, label_values_escape_backslash_quote_and_line_feed) {
  EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(label("executor", "cpu:0"), "{executor=\"cpu:0\"}");
  EXPECT_EQ(label("", "ignored"), "");
  EXPECT_EQ(labels({{"executor", "x"}, {"device", "cuda:0"}}),
            "{executor=\"x\",device=\"cuda:0\"}");
  EXPECT_EQ(labels({}), "");
}

TEST(prometheus, families_samples_and_histograms) {
  std::string out;
  write_counter(out, "c_total", "Things counted.", uint64_t{18446744073709551615ULL});
  write_header(out, "g", "A gauge.", "gauge");
  write_sample(out, "g", label("k", "v"), 1.5);
  write_histogram_series(out, "h", {0.1, 1}, {2, 3, 4}, 2.5, 4, "kind", "decode");
  EXPECT_EQ(out,
            "# HELP c_total Things counted.\n"
            "# TYPE c_total counter\n"
            "c_total 18446744073709551615\n"
            "# HELP g A gauge.\n"
            "# TYPE g gauge\n"
            "g{k=\"v\"} 1.5\n"
            "h_bucket{kind=\"decode\",le=\"0.1\"} 2\n"
            "h_bucket{kind=\"decode\",le=\"1\"} 3\n"
            "h_bucket{kind=\"decode\",le=\"+Inf\"} 4\n"
            "h_sum{kind=\"decode\"} 2.5\n"
            "h_count{kind=\"decode\"} 4\n");
}
