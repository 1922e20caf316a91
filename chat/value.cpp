#include "chat/value.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace conveyor::chat {

namespace {

std::size_t add_weight(std::size_t a, std::size_t b) {
  return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

}  // namespace

value value::none() {
  value v;
  v.kind_ = kind::none;
  return v;
}

value::value(bool b) : kind_(kind::boolean), b_(b) {}
value::value(int64_t i) : kind_(kind::integer), i_(i) {}
value::value(double d) : kind_(kind::floating), d_(d) {}
value::value(std::string s)
    : kind_(kind::string),
      weight_(s.size()),
      s_(std::make_shared<const std::string>(std::move(s))) {}

value::value(value_list l) : kind_(kind::list) {
  for (const auto& item : l) {
    weight_ = add_weight(weight_, add_weight(item_weight, item.weight_));
    depth_ = std::max(depth_, item.depth_);
  }
  depth_ += 1;
  l_ = std::make_shared<const value_list>(std::move(l));
}

value::value(value_map m) : kind_(kind::map) {
  for (const auto& [key, item] : m) {
    weight_ = add_weight(weight_, add_weight(item_weight + key.size(), item.weight_));
    depth_ = std::max(depth_, item.depth_);
  }
  depth_ += 1;
  m_ = std::make_shared<value_map>(std::move(m));
}

value value::make_namespace(value_map attributes) {
  value v;
  v.kind_ = kind::map;
  v.namespace_ = true;
  v.depth_ = 1;
  v.weight_ = item_weight;
  v.m_ = std::make_shared<value_map>(std::move(attributes));
  return v;
}

double value::as_double() const {
  switch (kind_) {
    case kind::boolean:
      return b_ ? 1.0 : 0.0;
    case kind::integer:
      return static_cast<double>(i_);
    case kind::floating:
      return d_;
    default:
      return 0.0;
  }
}

value value::get(std::string_view key) const {
  if (kind_ != kind::map) return {};
  for (const auto& [k, v] : *m_)
    if (k == key) return v;
  return {};
}

void value::set_attribute(const std::string& key, value v) {
  for (auto& [k, old] : *m_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  m_->emplace_back(key, std::move(v));
}

void value::clear_attributes() {
  if (namespace_) m_->clear();
}

bool value::truthy() const {
  switch (kind_) {
    case kind::undefined:
    case kind::none:
      return false;
    case kind::boolean:
      return b_;
    case kind::integer:
      return i_ != 0;
    case kind::floating:
      return d_ != 0.0;
    case kind::string:
      return !s_->empty();
    case kind::list:
      return !l_->empty();
    case kind::map:
      return namespace_ || !m_->empty();
  }
  return false;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  // buf is "-d.ddde+XX": split digits and exponent.
  std::string s = buf;
  bool negative = s[0] == '-';
  if (negative) s.erase(0, 1);
  auto e = s.find('e');
  int exponent = std::atoi(s.c_str() + e + 1);
  std::string digits = s.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the point
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
    } else {
      auto int_len = static_cast<std::size_t>(exponent) + 1;
      if (digits.size() <= int_len) {
        out += digits + std::string(int_len - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, int_len) + "." + digits.substr(int_len);
      }
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

namespace {

void quote_python(std::string& out, const std::string& s) {
  // Python prefers single quotes unless the text has one and no double quote.
  bool single = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  char q = single ? '"' : '\'';
  out += q;
  for (unsigned char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c == static_cast<unsigned char>(q)) {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += q;
}

void quote_json(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

}  // namespace

std::string value::str() const {
  std::string out;
  append_str(out, SIZE_MAX);
  return out;
}

std::string value::repr() const {
  std::string out;
  append_repr(out, SIZE_MAX);
  return out;
}

bool value::append_str(std::string& out, std::size_t max_bytes) const {
  switch (kind_) {
    case kind::undefined:
      return true;
    case kind::string:
      if (s_->size() > max_bytes || out.size() > max_bytes - s_->size()) return false;
      out += *s_;
      return true;
    default:
      return append_repr(out, max_bytes);
  }
}

bool value::append_repr(std::string& out, std::size_t max_bytes) const {
  switch (kind_) {
    case kind::undefined:
      break;
    case kind::none:
      out += "None";
      break;
    case kind::boolean:
      out += b_ ? "True" : "False";
      break;
    case kind::integer:
      out += std::to_string(i_);
      break;
    case kind::floating:
      out += float_repr(d_);
      break;
    case kind::string:
      quote_python(out, *s_);
      break;
    case kind::list: {
      out += '[';
      for (std::size_t i = 0; i < l_->size(); ++i) {
        if (i) out += ", ";
        if (!(*l_)[i].append_repr(out, max_bytes)) return false;
      }
      out += ']';
      break;
    }
    case kind::map: {
      if (namespace_) {
        out += "<Namespace>";
        break;
      }
      out += '{';
      bool first = true;
      for (const auto& [k, v] : *m_) {
        if (!first) out += ", ";
        first = false;
        quote_python(out, k);
        out += ": ";
        if (!v.append_repr(out, max_bytes)) return false;
      }
      out += '}';
      break;
    }
  }
  return out.size() <= max_bytes;
}

value::json_error value::to_json(std::string& out, int indent, std::size_t max_bytes) const {
  return append_json(out, indent, max_bytes, 0);
}

value::json_error value::append_json(std::string& out, int indent, std::size_t max_bytes,
                                     int level) const {
  // The indentation of `level`: at most max_bytes, so it never overflows (levels nest shallowly).
  auto newline = [&](int at) {
    const auto spaces = static_cast<std::size_t>(indent) * static_cast<std::size_t>(at);
    if (spaces > max_bytes || out.size() + 1 > max_bytes - spaces) return false;
    out += '\n';
    out.append(spaces, ' ');
    return true;
  };
  switch (kind_) {
    case kind::undefined:
      return json_error::undefined;
    case kind::none:
      out += "null";
      break;
    case kind::boolean:
      out += b_ ? "true" : "false";
      break;
    case kind::integer:
      out += std::to_string(i_);
      break;
    case kind::floating:
      if (std::isnan(d_))
        out += "NaN";
      else if (std::isinf(d_))
        out += d_ < 0 ? "-Infinity" : "Infinity";
      else
        out += float_repr(d_);
      break;
    case kind::string:
      quote_json(out, *s_);
      break;
    case kind::list: {
      if (l_->empty()) {
        out += "[]";
        break;
      }
      out += '[';
      for (std::size_t i = 0; i < l_->size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0 && !newline(level + 1)) return json_error::too_large;
        auto err = (*l_)[i].append_json(out, indent, max_bytes, level + 1);
        if (err != json_error::none) return err;
      }
      if (indent >= 0 && !newline(level)) return json_error::too_large;
      out += ']';
      break;
    }
    case kind::map: {
      if (namespace_) return json_error::namespace_object;
      if (m_->empty()) {
        out += "{}";
        break;
      }
      out += '{';
      bool first = true;
      for (const auto& [k, v] : *m_) {
        if (!first) out += indent >= 0 ? "," : ", ";
        first = false;
        if (indent >= 0 && !newline(level + 1)) return json_error::too_large;
        quote_json(out, k);
        out += ": ";
        auto err = v.append_json(out, indent, max_bytes, level + 1);
        if (err != json_error::none) return err;
      }
      if (indent >= 0 && !newline(level)) return json_error::too_large;
      out += '}';
      break;
    }
  }
  return out.size() <= max_bytes ? json_error::none : json_error::too_large;
}

bool operator==(const value& a, const value& b) {
  using kind = value::kind;
  auto numeric = [](kind k) {
    return k == kind::boolean || k == kind::integer || k == kind::floating;
  };
  if (numeric(a.kind_) && numeric(b.kind_)) {
    if (a.kind_ != kind::floating && b.kind_ != kind::floating)
      return (a.kind_ == kind::boolean ? int64_t{a.b_} : a.i_) ==
             (b.kind_ == kind::boolean ? int64_t{b.b_} : b.i_);
    return a.as_double() == b.as_double();
  }
  if (a.kind_ != b.kind_) return false;
  switch (a.kind_) {
    case kind::undefined:
    case kind::none:
      return true;
    case kind::string:
      return *a.s_ == *b.s_;
    case kind::list:
      return *a.l_ == *b.l_;
    case kind::map:
      if (a.namespace_ || b.namespace_) return a.m_ == b.m_;
      if (a.m_->size() != b.m_->size()) return false;
      for (const auto& [k, v] : *a.m_)
        if (b.get(k) != v || b.get(k).is_undefined()) return false;
      return true;
    default:
      return false;
  }
}

const char* value::type_name() const {
  switch (kind_) {
    case kind::undefined:
      return "undefined";
    case kind::none:
      return "none";
    case kind::boolean:
      return "boolean";
    case kind::integer:
      return "integer";
    case kind::floating:
      return "float";
    case kind::string:
      return "string";
    case kind::list:
      return "list";
    case kind::map:
      return namespace_ ? "namespace" : "map";
  }
  return "value";
}

}  // namespace conveyor::chat
