// Rendering a pipeline as TOML (`conveyor config --print`), in the order of the shipped file.
#include <cstdio>

#include "config/config.hpp"
#include "config/schema.hpp"

namespace conveyor::config {

namespace {

/// A TOML basic string.
std::string quote(std::string_view x) {
  std::string out = "\"";
  for (char c : x) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04X", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string render(const std::string& x) {
  return quote(x);
}

std::string render(int64_t x) {
  return std::to_string(x);
}

std::string render(double x) {
  return detail::format_real(x);
}

std::string render(bool x) {
  return x ? "true" : "false";
}

std::string render(const std::vector<std::string>& xs) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i > 0) out += ", ";
    out += quote(xs[i]);
  }
  return out + "]";
}

/// Writes `key = value` lines under table headers.
struct writer {
  std::string out;

  template <class T>
  void operator()(std::string_view key, const T& value, const detail::rule&) {
    out.append(key);
    out += " = " + render(value) + "\n";
  }

  template <class S>
  void section(std::string_view name, const S& x) {
    out += "\n[";
    out.append(name);
    out += "]\n";
    detail::fields(*this, x);
  }

  void executor_list(bool automatic, const std::vector<executor>& xs) {
    if (automatic) return;  // written at the top by to_toml
    for (const auto& x : xs) {
      out += "\n[[";
      out.append(detail::executors_key);
      out += "]]\n";
      detail::fields(*this, x);
    }
  }
};

}  // namespace

std::string to_toml(const pipeline& cfg) {
  writer w;
  w.out = "# Conveyor: the effective configuration.\n";
  // A top-level key must precede every table; a listed executor is an [[executors]] table.
  if (cfg.auto_executors || cfg.executors.empty()) {
    w.out.append(detail::executors_key);
    w.out += cfg.auto_executors ? " = \"auto\"\n" : " = []\n";
  }
  detail::sections(w, cfg);
  return std::move(w.out);
}

}  // namespace conveyor::config
