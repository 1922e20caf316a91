// The Prometheus text exposition format.
#include "common/prometheus.hpp"

#include <charconv>
#include <cmath>

namespace conveyor::prometheus {

std::string format_value(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "+Inf" : "-Inf";
  if (x == std::floor(x) && std::abs(x) < 9007199254740992.0) {  // 2^53: exact integers
    return std::to_string(static_cast<int64_t>(x));
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::general);
  return std::string(buf, res.ptr);
}

std::string escape_label_value(std::string_view x) {
  std::string out;
  out.reserve(x.size());
  for (char c : x) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string label(std::string_view name, std::string_view value) {
  if (name.empty()) return {};
  return labels({{name, value}});
}

std::string labels(const std::vector<std::pair<std::string_view, std::string_view>>& pairs) {
  if (pairs.empty()) return {};
  std::string out = "{";
  for (const auto& [name, value] : pairs) {
    if (out.size() > 1) out += ',';
    out += name;
    out += "=\"";
    out += escape_label_value(value);
    out += '"';
  }
  out += '}';
  return out;
}

void write_header(std::string& out, std::string_view name, std::string_view help,
                  std::string_view type) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void write_sample(std::string& out, std::string_view name, std::string_view labels, double value) {
  out += name;
  out += labels;
  out += ' ';
  out += format_value(value);
  out += '\n';
}

void write_sample(std::string& out, std::string_view name, std::string_view labels,
                  uint64_t value) {
  out += name;
  out += labels;
  out += ' ';
  out += std::to_string(value);
  out += '\n';
}

void write_counter(std::string& out, std::string_view name, std::string_view help, uint64_t value) {
  write_header(out, name, help, "counter");
  write_sample(out, name, {}, value);
}

void write_histogram_series(std::string& out, std::string_view name,
                            const std::vector<double>& upper_bounds,
                            const std::vector<uint64_t>& cumulative, double sum, uint64_t count,
                            std::string_view label_name, std::string_view label_value) {
  std::string prefix = "{";
  if (!label_name.empty()) {
    prefix += label_name;
    prefix += "=\"";
    prefix += escape_label_value(label_value);
    prefix += "\",";
  }
  for (std::size_t i = 0; i < cumulative.size(); ++i) {
    out += name;
    out += "_bucket";
    out += prefix;
    out += "le=\"";
    out += i < upper_bounds.size() ? format_value(upper_bounds[i]) : std::string{"+Inf"};
    out += "\"} ";
    out += std::to_string(cumulative[i]);
    out += '\n';
  }
  const auto tail = label(label_name, label_value);
  write_sample(out, std::string{name} + "_sum", tail, sum);
  write_sample(out, std::string{name} + "_count", tail, count);
}

}  // namespace conveyor::prometheus
