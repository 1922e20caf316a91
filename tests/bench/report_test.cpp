// Reports: the table, the JSON document and the SVG charts.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bench/report.hpp"

using namespace conveyor::bench;

namespace {

run_summary run_of(const std::string& name, double rate, std::vector<double> e2e) {
  std::vector<request_record> records;
  for (double x : e2e) {
    request_record r;
    r.status = request_status::completed;
    r.chunk_times = {x / 4, x / 2};
    r.output_tokens = 2;
    r.end = x;
    records.push_back(r);
  }
  request_record rejected;
  rejected.status = request_status::rejected;
  records.push_back(rejected);
  return summarize(name, rate, records, 10);
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

/// A minimal XML check: every tag closes in order, attributes are quoted, and one root element.
/// Returns "" when well-formed, else what is wrong.
std::string xml_problem(const std::string& xml) {
  std::vector<std::string> open;
  std::size_t roots = 0;
  std::size_t i = 0;
  while ((i = xml.find('<', i)) != std::string::npos) {
    const auto end = xml.find('>', i);
    if (end == std::string::npos) return "an unclosed '<'";
    std::string tag = xml.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return "an empty tag";
    if (tag[0] == '?' || tag[0] == '!') continue;
    if (tag[0] == '/') {
      const auto name = tag.substr(1);
      if (open.empty() || open.back() != name) return "</" + name + "> closes nothing open";
      open.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    const auto name = tag.substr(0, tag.find_first_of(" /\n"));
    if (count_of(tag, "\"") % 2 != 0) return "unbalanced quotes in <" + name + ">";
    if (open.empty()) ++roots;
    if (!self_closing) open.push_back(name);
  }
  if (!open.empty()) return "<" + open.back() + "> never closes";
  if (roots != 1) return std::to_string(roots) + " root elements";
  // Text must not hold a bare '&' or '<' (escaped as entities).
  for (auto at = xml.find('&'); at != std::string::npos; at = xml.find('&', at + 1))
    if (xml.compare(at, 4, "&lt;") != 0 && xml.compare(at, 4, "&gt;") != 0 &&
        xml.compare(at, 5, "&amp;") != 0 && xml.compare(at, 6, "&quot;") != 0)
      return "a bare '&'";
  return "";
}

}  // namespace

TEST(bench_report, axis_ticks_are_round) {
  EXPECT_EQ(axis_ticks(1.0), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1.0}));
  EXPECT_EQ(axis_ticks(7.3), (std::vector<double>{0, 2, 4, 6, 8}));
  EXPECT_EQ(axis_ticks(0.0).back(), 1.0);
  EXPECT_GE(axis_ticks(123.0).back(), 123.0);
}

TEST(bench_report, cdf_svg_is_well_formed_with_one_polyline_per_run) {
  std::vector<run_summary> runs = {run_of("sequential", 5, {0.5, 1.5, 3.0, 2.0}),
                                   run_of("seed", 5, {0.4, 0.9, 1.2}),
                                   run_of("continuous <&>", 5, {0.2, 0.3, 0.35, 0.8, 0.6})};
  const auto svg = render_cdf_svg(runs, "E2E latency CDF: a & b");
  EXPECT_EQ(xml_problem(svg), "") << svg;
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_EQ(count_of(svg, "<polyline"), runs.size());
  EXPECT_NE(svg.find("E2E latency (s)"), std::string::npos);     // x label
  EXPECT_NE(svg.find(">sequential</text>"), std::string::npos);  // legend
  EXPECT_NE(svg.find(">continuous &lt;&amp;&gt;</text>"), std::string::npos);
  // A step CDF: 1 start point + 2 per sample.
  const auto first = svg.find("points=\"");
  const auto last = svg.find('"', first + 8);
  EXPECT_EQ(count_of(svg.substr(first, last - first), ","), 1u + 2u * 4u);
}

TEST(bench_report, cdf_svg_skips_runs_without_completions) {
  std::vector<run_summary> runs = {run_of("seed", 5, {0.4}), run_of("sequential", 5, {})};
  const auto svg = render_cdf_svg(runs, "t");
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count_of(svg, "<polyline"), 1u);
  EXPECT_NE(svg.find(">sequential</text>"), std::string::npos);
}

TEST(bench_report, rate_svg_has_p50_and_p99_per_policy) {
  std::vector<run_summary> runs;
  for (double rate : {5.0, 10.0, 20.0}) {
    runs.push_back(run_of("seed", rate, {0.1 * rate, 0.2 * rate}));
    runs.push_back(run_of("continuous", rate, {0.05 * rate, 0.1 * rate}));
  }
  runs.push_back(run_of("seed", std::numeric_limits<double>::infinity(), {9.0}));
  const auto svg = render_rate_svg(runs, "rate");
  EXPECT_EQ(xml_problem(svg), "") << svg;
  EXPECT_EQ(count_of(svg, "<polyline"), 4u);
  EXPECT_EQ(count_of(svg, "<circle"), 12u);  // the burst run is left out
  EXPECT_NE(svg.find("arrival rate (requests/s)"), std::string::npos);
}

TEST(bench_report, table_and_json_show_every_number) {
  std::vector<run_summary> runs = {run_of("seed", 5, {0.5, 1.0}), run_of("continuous", 5, {0.2})};
  runs[0].batch_size_mean = 3.5;
  runs[0].padding_fraction = 0.25;
  runs[0].executor_busy_ratio = 0.5;
  runs[0].process_cpu_s = 0.002;  // over 4 output tokens
  const auto table = render_table(runs);
  for (const char* row :
       {"requests", "completed", "rejected", "failed", "wall time", "requests/s", "output tokens/s",
        "TTFT", "TPOT", "ITL", "E2E", "mean batch size", "padding fraction", "executor busy ratio",
        "bench process CPU (s)", "bench CPU per output token (us)"})
    EXPECT_NE(table.find(row), std::string::npos) << row;
  EXPECT_NE(table.find("750.0 / 750.0 / 950.0 / 995.0"), std::string::npos) << table;
  EXPECT_NE(table.find("25.0%"), std::string::npos);
  EXPECT_NE(table.find("500.0"), std::string::npos) << table;  // 2 ms of CPU / 4 tokens
  auto j = to_json(runs, {{"workload", "w.jsonl"}});
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["settings"]["workload"], "w.jsonl");
  ASSERT_EQ(j["runs"].size(), 2u);
  const auto& r = j["runs"][0];
  EXPECT_EQ(r["name"], "seed");
  EXPECT_EQ(r["requests"], 3);
  EXPECT_EQ(r["completed"], 2);
  EXPECT_EQ(r["rejected"], 1);
  EXPECT_EQ(r["failed"], 0);
  EXPECT_DOUBLE_EQ(r["e2e_s"]["p50"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(r["batch_size_mean"].get<double>(), 3.5);
  EXPECT_TRUE(j["runs"][1]["batch_size_mean"].is_null());  // NaN
  EXPECT_DOUBLE_EQ(r["process_cpu_s"].get<double>(), 0.002);
  EXPECT_TRUE(j["runs"][1]["process_cpu_s"].is_null());
  EXPECT_TRUE(j["runs"][1]["tpot_s"]["mean"].is_number());
}

TEST(bench_report, chat_runs_show_ttft_by_turn_and_the_hit_rate) {
  std::vector<request_record> records;
  // Two conversations of two turns: TTFT 100 and 300 ms at turn 1, 20 and 40 ms at turn 2.
  for (double ttft : {0.1, 0.02, 0.3, 0.04}) {
    request_record r;
    r.status = request_status::completed;
    r.turn = ttft < 0.05 ? 2 : 1;
    r.chunk_times = {ttft};
    r.output_tokens = 1;
    r.end = ttft;
    r.prompt_tokens = 100;
    r.cached_tokens = r.turn == 2 ? 75 : 0;
    records.push_back(r);
  }
  std::vector<run_summary> runs = {summarize("http://a", 1, records, 1)};
  for (auto& r : records) r.cached_tokens.reset();
  runs.push_back(summarize("http://b", 1, records, 1));
  const auto table = render_table(runs);
  EXPECT_NE(table.find("TTFT turn 1 ms (mean/p50)"), std::string::npos) << table;
  EXPECT_NE(table.find("200.0 / 200.0"), std::string::npos) << table;
  EXPECT_NE(table.find("TTFT turn 2 ms (mean/p50)"), std::string::npos) << table;
  EXPECT_NE(table.find("TTFT turns 2..2 ms (mean/p50)"), std::string::npos) << table;
  EXPECT_EQ(count_of(table, "30.0 / 30.0"), 4u) << table;  // turn 2 and turns 2.., both runs
  EXPECT_NE(table.find("37.5% (150 / 400)"), std::string::npos) << table;
  EXPECT_NE(table.find("n/a"), std::string::npos) << table;
  auto j = to_json(runs, {});
  const auto& a = j["runs"][0];
  ASSERT_EQ(a["ttft_by_turn_s"].size(), 2u);
  EXPECT_EQ(a["ttft_by_turn_s"][0]["count"], 2);
  EXPECT_DOUBLE_EQ(a["ttft_by_turn_s"][1]["mean"].get<double>(), 0.03);
  EXPECT_DOUBLE_EQ(a["ttft_later_turns_s"]["p50"].get<double>(), 0.03);
  EXPECT_EQ(a["prompt_tokens"], 400);
  EXPECT_EQ(a["cached_tokens"], 150);
  EXPECT_DOUBLE_EQ(a["prefix_cache_hit_rate"].get<double>(), 0.375);
  EXPECT_TRUE(j["runs"][1]["prefix_cache_hit_rate"].is_null());
}

TEST(bench_report, completion_runs_without_prompt_counts_show_no_chat_rows) {
  const auto table = render_table({run_of("seed", 5, {0.5, 1.0})});
  EXPECT_EQ(table.find("TTFT turn"), std::string::npos) << table;
  EXPECT_EQ(table.find("prefix cache hit rate"), std::string::npos) << table;
}

TEST(bench_report, runs_with_constrained_requests_show_their_tpot_apart) {
  auto plain = run_of("seed", 5, {0.5, 1.0});
  EXPECT_EQ(render_table({plain}).find("JSON schema"), std::string::npos);
  auto mixed = plain;
  mixed.tpot_unconstrained = describe({0.002});
  mixed.tpot_constrained = describe({0.003});
  mixed.constrained_completed = 1;
  mixed.constrained_output_tokens = 40;
  const auto table = render_table({plain, mixed});
  EXPECT_NE(table.find("TPOT ms, no format"), std::string::npos) << table;
  EXPECT_NE(table.find("TPOT ms, JSON schema"), std::string::npos) << table;
  EXPECT_NE(table.find("3.0 / 3.0 / 3.0 / 3.0"), std::string::npos) << table;
  EXPECT_NE(table.find("1 (40)"), std::string::npos) << table;
  const auto j = to_json({mixed}, {});
  EXPECT_DOUBLE_EQ(j["runs"][0]["tpot_unconstrained_s"]["mean"].get<double>(), 0.002);
  EXPECT_DOUBLE_EQ(j["runs"][0]["tpot_constrained_s"]["p99"].get<double>(), 0.003);
  EXPECT_EQ(j["runs"][0]["constrained_completed"], 1);
  EXPECT_EQ(j["runs"][0]["constrained_output_tokens"], 40);
}
