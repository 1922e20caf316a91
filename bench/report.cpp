#include "bench/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

namespace conveyor::bench {

namespace {

// -- formatting ----------------------------------------------------------------------------------

std::string fmt(const char* format, double x) {
  if (!std::isfinite(x)) return std::isinf(x) ? "inf" : "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, x);
  return buf;
}

std::string fmt_ms(const distribution& d) {
  if (d.count == 0) return "-";
  return fmt("%.1f", d.mean * 1e3) + " / " + fmt("%.1f", d.p50 * 1e3) + " / " +
         fmt("%.1f", d.p90 * 1e3) + " / " + fmt("%.1f", d.p99 * 1e3);
}

std::string fmt_mean_p50(const distribution& d) {
  if (d.count == 0) return "-";
  return fmt("%.1f", d.mean * 1e3) + " / " + fmt("%.1f", d.p50 * 1e3);
}

// "37.5% (1200 / 3200)": the hit rate with the token counts it comes from; "n/a" when the
// responses did not say.
std::string fmt_hit_rate(const run_summary& r) {
  if (std::isnan(r.prefix_cache_hit_rate)) return "n/a";
  return fmt("%.1f%%", r.prefix_cache_hit_rate * 100) + " (" + std::to_string(r.cached_tokens) +
         " / " + std::to_string(r.prompt_tokens) + ")";
}

nlohmann::json number(double x) {
  if (std::isnan(x)) return nullptr;
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

nlohmann::json to_json(const distribution& d) {
  return {{"count", d.count},
          {"mean", number(d.mean)},
          {"p50", number(d.p50)},
          {"p90", number(d.p90)},
          {"p99", number(d.p99)}};
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// -- charts --------------------------------------------------------------------------------------

constexpr const char* palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};
constexpr std::size_t palette_size = sizeof(palette) / sizeof(palette[0]);

/// A plot area with linear axes; maps data to pixels and draws the frame.
struct chart {
  double width = 760, height = 460;
  double left = 70, right = 20, top = 40, bottom = 55;
  double x_max = 1, y_max = 1;
  std::vector<double> x_ticks, y_ticks;

  double px(double x) const { return left + x / x_max * (width - left - right); }
  double py(double y) const { return height - bottom - y / y_max * (height - top - bottom); }

  std::string open(const std::string& title) const {
    std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", width) +
         "\" height=\"" + fmt("%.0f", height) + "\" viewBox=\"0 0 " + fmt("%.0f", width) + " " +
         fmt("%.0f", height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    s += "<text x=\"" + fmt("%.1f", width / 2) +
         "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" + xml_escape(title) + "</text>\n";
    return s;
  }

  std::string axes(const std::string& x_label, const std::string& y_label, bool y_percent) const {
    std::string s = "<g stroke=\"#ddd\">\n";
    for (double t : x_ticks)
      s += "<line x1=\"" + fmt("%.1f", px(t)) + "\" y1=\"" + fmt("%.1f", py(0)) + "\" x2=\"" +
           fmt("%.1f", px(t)) + "\" y2=\"" + fmt("%.1f", py(y_max)) + "\"/>\n";
    for (double t : y_ticks)
      s += "<line x1=\"" + fmt("%.1f", px(0)) + "\" y1=\"" + fmt("%.1f", py(t)) + "\" x2=\"" +
           fmt("%.1f", px(x_max)) + "\" y2=\"" + fmt("%.1f", py(t)) + "\"/>\n";
    s += "</g>\n<g stroke=\"black\">\n";
    s += "<line x1=\"" + fmt("%.1f", px(0)) + "\" y1=\"" + fmt("%.1f", py(0)) + "\" x2=\"" +
         fmt("%.1f", px(x_max)) + "\" y2=\"" + fmt("%.1f", py(0)) + "\"/>\n";
    s += "<line x1=\"" + fmt("%.1f", px(0)) + "\" y1=\"" + fmt("%.1f", py(0)) + "\" x2=\"" +
         fmt("%.1f", px(0)) + "\" y2=\"" + fmt("%.1f", py(y_max)) + "\"/>\n";
    for (double t : x_ticks)
      s += "<line x1=\"" + fmt("%.1f", px(t)) + "\" y1=\"" + fmt("%.1f", py(0)) + "\" x2=\"" +
           fmt("%.1f", px(t)) + "\" y2=\"" + fmt("%.1f", py(0) + 5) + "\"/>\n";
    for (double t : y_ticks)
      s += "<line x1=\"" + fmt("%.1f", px(0) - 5) + "\" y1=\"" + fmt("%.1f", py(t)) + "\" x2=\"" +
           fmt("%.1f", px(0)) + "\" y2=\"" + fmt("%.1f", py(t)) + "\"/>\n";
    s += "</g>\n<g fill=\"black\">\n";
    for (double t : x_ticks)
      s += "<text x=\"" + fmt("%.1f", px(t)) + "\" y=\"" + fmt("%.1f", py(0) + 18) +
           "\" text-anchor=\"middle\">" + fmt("%g", t) + "</text>\n";
    for (double t : y_ticks)
      s += "<text x=\"" + fmt("%.1f", px(0) - 8) + "\" y=\"" + fmt("%.1f", py(t) + 4) +
           "\" text-anchor=\"end\">" + (y_percent ? fmt("%g", t * 100) + "%" : fmt("%g", t)) +
           "</text>\n";
    s += "<text x=\"" + fmt("%.1f", (px(0) + px(x_max)) / 2) + "\" y=\"" +
         fmt("%.1f", height - 12) + "\" text-anchor=\"middle\">" + xml_escape(x_label) +
         "</text>\n";
    s += "<text x=\"16\" y=\"" + fmt("%.1f", (py(0) + py(y_max)) / 2) +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " +
         fmt("%.1f", (py(0) + py(y_max)) / 2) + ")\">" + xml_escape(y_label) + "</text>\n";
    s += "</g>\n";
    return s;
  }

  /// A legend in the lower right corner (entries: label, colour, dashed).
  std::string legend(const std::vector<std::tuple<std::string, std::string, bool>>& entries,
                     bool upper_left) const {
    const double line_h = 18, box_w = 200;
    const double box_h = line_h * double(entries.size()) + 10;
    const double x0 = upper_left ? px(0) + 10 : px(x_max) - box_w - 10;
    const double y0 = upper_left ? py(y_max) + 10 : py(0) - box_h - 10;
    std::string s = "<g class=\"legend\">\n<rect x=\"" + fmt("%.1f", x0) + "\" y=\"" +
                    fmt("%.1f", y0) + "\" width=\"" + fmt("%.0f", box_w) + "\" height=\"" +
                    fmt("%.1f", box_h) + "\" fill=\"white\" stroke=\"#999\"/>\n";
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const auto& [label, colour, dashed] = entries[i];
      const double y = y0 + 14 + line_h * double(i);
      s += "<line x1=\"" + fmt("%.1f", x0 + 8) + "\" y1=\"" + fmt("%.1f", y - 4) + "\" x2=\"" +
           fmt("%.1f", x0 + 36) + "\" y2=\"" + fmt("%.1f", y - 4) + "\" stroke=\"" + colour +
           "\" stroke-width=\"2\"" + (dashed ? " stroke-dasharray=\"6 3\"" : "") + "/>\n";
      s += "<text x=\"" + fmt("%.1f", x0 + 44) + "\" y=\"" + fmt("%.1f", y) + "\">" +
           xml_escape(label) + "</text>\n";
    }
    s += "</g>\n";
    return s;
  }
};

std::string run_label(const run_summary& r, bool with_rate) {
  if (!with_rate) return r.name;
  return r.name + " @ " + (std::isinf(r.rate) ? std::string{"inf"} : fmt("%g", r.rate)) + "/s";
}

bool several_rates(const std::vector<run_summary>& runs) {
  for (const auto& r : runs)
    if (r.rate != runs.front().rate) return true;
  return false;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  if (seconds < 1) return fmt("%.1f ms", seconds * 1e3);
  return fmt("%.2f s", seconds);
}

std::vector<double> axis_ticks(double max, int target_count) {
  if (!(max > 0) || !std::isfinite(max)) max = 1;
  const double raw = max / double(std::max(target_count, 1));
  const int exponent = int(std::floor(std::log10(raw)));
  const double power = std::pow(10.0, std::abs(exponent));  // an exact integer
  int64_t multiple = 10;
  for (int64_t m : {1, 2, 5}) {
    const double step = exponent >= 0 ? double(m) * power : double(m) / power;
    if (step >= raw) {
      multiple = m;
      break;
    }
  }
  // Tick i is i * multiple * 10^exponent, computed from integers so that labels read 0.6, not
  // 0.6000000000000001.
  std::vector<double> ticks;
  for (int64_t i = 0;; ++i) {
    const double units = double(i * multiple);
    const double t = exponent >= 0 ? units * power : units / power;
    ticks.push_back(t);
    if (t >= max * (1 - 1e-12)) break;
  }
  return ticks;
}

std::string render_table(const std::vector<run_summary>& runs) {
  const bool with_rate = several_rates(runs);
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  auto row = [&](std::string label, auto cell) {
    std::vector<std::string> cells;
    for (const auto& r : runs) cells.push_back(cell(r));
    rows.emplace_back(std::move(label), std::move(cells));
  };
  auto count = [](std::size_t n) { return std::to_string(n); };
  row("", [&](const run_summary& r) { return run_label(r, with_rate); });
  row("requests", [&](const run_summary& r) { return count(r.requests); });
  row("completed", [&](const run_summary& r) { return count(r.completed); });
  row("rejected", [&](const run_summary& r) { return count(r.rejected); });
  row("failed", [&](const run_summary& r) { return count(r.failed); });
  row("wall time (s)", [](const run_summary& r) { return fmt("%.2f", r.wall_s); });
  row("requests/s", [](const run_summary& r) { return fmt("%.2f", r.requests_per_s); });
  row("output tokens/s", [](const run_summary& r) { return fmt("%.1f", r.output_tokens_per_s); });
  row("TTFT ms (mean/p50/p90/p99)", [](const run_summary& r) { return fmt_ms(r.ttft); });
  row("TPOT ms (mean/p50/p90/p99)", [](const run_summary& r) { return fmt_ms(r.tpot); });
  row("ITL ms (mean/p50/p90/p99)", [](const run_summary& r) { return fmt_ms(r.itl); });
  row("E2E ms (mean/p50/p90/p99)", [](const run_summary& r) { return fmt_ms(r.e2e); });
  // Chat workloads: TTFT by turn of the conversations, and the prefix cache's share of the
  // prompts (also for any run whose responses reported prompt tokens).
  std::size_t turns = 0;
  bool prompts_counted = false;
  for (const auto& r : runs) {
    turns = std::max(turns, r.ttft_by_turn.size());
    prompts_counted = prompts_counted || r.prompt_tokens > 0;
  }
  for (std::size_t t = 0; t < turns; ++t)
    row("TTFT turn " + std::to_string(t + 1) + " ms (mean/p50)", [t](const run_summary& r) {
      return t < r.ttft_by_turn.size() ? fmt_mean_p50(r.ttft_by_turn[t]) : std::string{"-"};
    });
  if (turns >= 2)
    row("TTFT turns 2.." + std::to_string(turns) + " ms (mean/p50)",
        [](const run_summary& r) { return fmt_mean_p50(r.ttft_later_turns); });
  if (turns > 0 || prompts_counted)
    row("prefix cache hit rate (cached / prompt tokens)",
        [](const run_summary& r) { return fmt_hit_rate(r); });
  // Runs that gave some requests an output format: the TPOT of each kind apart.
  if (std::any_of(runs.begin(), runs.end(),
                  [](const run_summary& r) { return r.constrained_completed > 0; })) {
    row("TPOT ms, no format (mean/p50/p90/p99)",
        [](const run_summary& r) { return fmt_ms(r.tpot_unconstrained); });
    row("TPOT ms, JSON schema (mean/p50/p90/p99)",
        [](const run_summary& r) { return fmt_ms(r.tpot_constrained); });
    row("JSON schema requests completed (output tokens)", [](const run_summary& r) {
      return std::to_string(r.constrained_completed) + " (" +
             std::to_string(r.constrained_output_tokens) + ")";
    });
  }
  row("mean batch size", [](const run_summary& r) { return fmt("%.2f", r.batch_size_mean); });
  row("padding fraction",
      [](const run_summary& r) { return fmt("%.1f%%", r.padding_fraction * 100); });
  row("executor busy ratio",
      [](const run_summary& r) { return fmt("%.1f%%", r.executor_busy_ratio * 100); });
  row("bench process CPU (s)", [](const run_summary& r) { return fmt("%.2f", r.process_cpu_s); });
  row("bench CPU per output token (us)", [](const run_summary& r) {
    return fmt("%.1f", r.output_tokens > 0 ? r.process_cpu_s * 1e6 / double(r.output_tokens)
                                           : std::numeric_limits<double>::quiet_NaN());
  });
  std::size_t label_w = 0;
  std::vector<std::size_t> widths(runs.size(), 0);
  for (const auto& [label, cells] : rows) {
    label_w = std::max(label_w, label.size());
    for (std::size_t i = 0; i < cells.size(); ++i) widths[i] = std::max(widths[i], cells[i].size());
  }
  std::string out;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const auto& [label, cells] = rows[k];
    out += label + std::string(label_w - label.size(), ' ');
    for (std::size_t i = 0; i < cells.size(); ++i)
      out += "  " + std::string(widths[i] - cells[i].size(), ' ') + cells[i];
    out += '\n';
    if (k == 0) {
      std::size_t total = label_w;
      for (auto w : widths) total += 2 + w;
      out += std::string(total, '-') + '\n';
    }
  }
  return out;
}

nlohmann::json to_json(const run_summary& r) {
  nlohmann::json by_turn = nlohmann::json::array();
  for (const auto& d : r.ttft_by_turn) by_turn.push_back(to_json(d));
  return {{"name", r.name},
          {"rate", number(r.rate)},
          {"requests", r.requests},
          {"completed", r.completed},
          {"rejected", r.rejected},
          {"failed", r.failed},
          {"wall_s", number(r.wall_s)},
          {"requests_per_s", number(r.requests_per_s)},
          {"output_tokens", r.output_tokens},
          {"output_tokens_per_s", number(r.output_tokens_per_s)},
          {"ttft_s", to_json(r.ttft)},
          {"tpot_s", to_json(r.tpot)},
          {"tpot_unconstrained_s", to_json(r.tpot_unconstrained)},
          {"tpot_constrained_s", to_json(r.tpot_constrained)},
          {"constrained_completed", r.constrained_completed},
          {"constrained_output_tokens", r.constrained_output_tokens},
          {"itl_s", to_json(r.itl)},
          {"e2e_s", to_json(r.e2e)},
          {"ttft_by_turn_s", by_turn},
          {"ttft_later_turns_s", to_json(r.ttft_later_turns)},
          {"prompt_tokens", r.prompt_tokens},
          {"cached_tokens", r.cached_tokens},
          {"prefix_cache_hit_rate", number(r.prefix_cache_hit_rate)},
          {"batch_size_mean", number(r.batch_size_mean)},
          {"padding_fraction", number(r.padding_fraction)},
          {"executor_busy_ratio", number(r.executor_busy_ratio)},
          {"process_cpu_s", number(r.process_cpu_s)}};
}

nlohmann::json to_json(const std::vector<run_summary>& runs, const nlohmann::json& settings) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : runs) list.push_back(to_json(r));
  return {{"version", 1}, {"settings", settings}, {"runs", list}};
}

std::string render_cdf_svg(const std::vector<run_summary>& runs, const std::string& title) {
  const bool with_rate = several_rates(runs);
  chart c;
  double max_x = 0;
  for (const auto& r : runs)
    if (!r.e2e_sorted.empty()) max_x = std::max(max_x, r.e2e_sorted.back());
  c.x_ticks = axis_ticks(max_x);
  c.x_max = c.x_ticks.back();
  c.y_ticks = {0, 0.25, 0.5, 0.75, 1};
  c.y_max = 1;
  std::string s = c.open(title);
  s += c.axes("E2E latency (s)", "completed requests", true);
  std::vector<std::tuple<std::string, std::string, bool>> entries;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const auto& r = runs[k];
    const std::string colour = palette[k % palette_size];
    entries.emplace_back(run_label(r, with_rate), colour, false);
    if (r.e2e_sorted.empty()) continue;
    // A step function: at each sorted latency the fraction jumps from i/n to (i+1)/n.
    const double n = double(r.e2e_sorted.size());
    std::string points = fmt("%.2f", c.px(0)) + "," + fmt("%.2f", c.py(0));
    for (std::size_t i = 0; i < r.e2e_sorted.size(); ++i) {
      const double x = c.px(r.e2e_sorted[i]);
      points += " " + fmt("%.2f", x) + "," + fmt("%.2f", c.py(double(i) / n));
      points += " " + fmt("%.2f", x) + "," + fmt("%.2f", c.py(double(i + 1) / n));
    }
    s += "<polyline fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"2\" points=\"" + points +
         "\"><title>" + xml_escape(run_label(r, with_rate)) + "</title></polyline>\n";
  }
  s += c.legend(entries, false);
  s += "</svg>\n";
  return s;
}

std::string render_rate_svg(const std::vector<run_summary>& runs, const std::string& title) {
  // Series per name, in first-seen order; points sorted by rate.
  std::vector<std::string> names;
  std::map<std::string, std::vector<const run_summary*>> series;
  double max_rate = 0, max_latency = 0;
  for (const auto& r : runs) {
    if (!std::isfinite(r.rate)) continue;
    if (!series.count(r.name)) names.push_back(r.name);
    series[r.name].push_back(&r);
    max_rate = std::max(max_rate, r.rate);
    if (std::isfinite(r.e2e.p99)) max_latency = std::max(max_latency, r.e2e.p99);
  }
  chart c;
  c.x_ticks = axis_ticks(max_rate);
  c.x_max = c.x_ticks.back();
  c.y_ticks = axis_ticks(max_latency);
  c.y_max = c.y_ticks.back();
  std::string s = c.open(title);
  s += c.axes("arrival rate (requests/s)", "E2E latency (s)", false);
  std::vector<std::tuple<std::string, std::string, bool>> entries;
  for (std::size_t k = 0; k < names.size(); ++k) {
    auto& points = series[names[k]];
    std::sort(points.begin(), points.end(),
              [](const run_summary* a, const run_summary* b) { return a->rate < b->rate; });
    const std::string colour = palette[k % palette_size];
    for (int which = 0; which < 2; ++which) {
      std::string coords, dots;
      for (const auto* r : points) {
        const double y = which == 0 ? r->e2e.p50 : r->e2e.p99;
        if (!std::isfinite(y)) continue;
        const std::string x_s = fmt("%.2f", c.px(r->rate)), y_s = fmt("%.2f", c.py(y));
        coords += (coords.empty() ? "" : " ") + x_s + "," + y_s;
        dots += "<circle cx=\"" + x_s + "\" cy=\"" + y_s + "\" r=\"3\" fill=\"" + colour + "\"/>\n";
      }
      const std::string label = names[k] + (which == 0 ? " p50" : " p99");
      entries.emplace_back(label, colour, which == 1);
      s += "<polyline fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"2\"" +
           (which == 1 ? " stroke-dasharray=\"6 3\"" : "") + " points=\"" + coords + "\"><title>" +
           xml_escape(label) + "</title></polyline>\n" + dots;
    }
  }
  s += c.legend(entries, true);
  s += "</svg>\n";
  return s;
}

}  // namespace conveyor::bench
