// The values a chat template computes with: Jinja's undefined, none, booleans, integers,
// floats, strings, lists and maps (insertion-ordered), printed and compared as Python does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace conveyor::chat {

class value;

/// A list; shared between copies of a value (templates never mutate lists).
using value_list = std::vector<value>;

/// A map in insertion order (as Python's dict keeps it).
using value_map = std::vector<std::pair<std::string, value>>;

/// One value of a template. Copies are cheap: lists and maps are shared. A namespace is a map
/// whose copies see each other's attribute assignments (Jinja's `namespace()`); it is opaque
/// (neither iterated, printed nor serialized), so a namespace that holds itself is no cycle for
/// anything but its owner, which breaks it (`clear_attributes`).
class value {
 public:
  /// What a value holds.
  enum class kind : uint8_t { undefined, none, boolean, integer, floating, string, list, map };

  /// The weight of one item of a list or map: about the bytes it occupies.
  static constexpr std::size_t item_weight = 64;

  /// Why `to_json` gave no JSON.
  enum class json_error : uint8_t {
    none,
    undefined,         // an undefined value has no JSON form
    namespace_object,  // nor has a namespace (Python's json.dumps refuses a Namespace)
    too_large,         // the text would exceed the byte limit given
  };

  /// Undefined: a missing variable, key or attribute.
  value() = default;
  /// The none value (`None`).
  static value none();
  value(bool b);
  value(int64_t i);
  value(int i) : value(static_cast<int64_t>(i)) {}
  value(double d);
  value(std::string s);
  value(const char* s) : value(std::string{s}) {}
  value(value_list l);
  value(value_map m);
  /// A namespace object with these initial attributes.
  static value make_namespace(value_map attributes);

  // -- inspection ----------------------------------------------------------------------------

  kind type() const { return kind_; }
  bool is_undefined() const { return kind_ == kind::undefined; }
  bool is_none() const { return kind_ == kind::none; }
  bool is_string() const { return kind_ == kind::string; }
  bool is_number() const { return kind_ == kind::integer || kind_ == kind::floating; }
  bool is_list() const { return kind_ == kind::list; }
  bool is_map() const { return kind_ == kind::map; }
  bool is_namespace() const { return kind_ == kind::map && namespace_; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  /// The number as a double (booleans and integers converted).
  double as_double() const;
  const std::string& as_string() const { return *s_; }
  const value_list& as_list() const { return *l_; }
  const value_map& as_map() const { return *m_; }

  /// The value of `key` in a map, or undefined.
  value get(std::string_view key) const;
  /// Sets `key` of a namespace (visible to every copy of it).
  void set_attribute(const std::string& key, value v);
  /// Drops every attribute of a namespace (breaking any cycle through it).
  void clear_attributes();
  /// Whether another value shares this list, map or namespace.
  bool shared() const { return (l_ && l_.use_count() > 1) || (m_ && m_.use_count() > 1); }

  /// About the bytes this value occupies: a string's length; `item_weight` for each item of a
  /// list or map plus its key's length and its own weight (a value shared by several items
  /// counts at each); `item_weight` for a namespace; 0 for the rest. Saturates.
  std::size_t weight() const { return weight_; }
  /// How deep lists and maps nest: 0 for scalars and strings, 1 for a namespace or a list of
  /// scalars, and so on.
  uint32_t depth() const { return depth_; }

  /// Python's truth: empty strings, lists and maps, 0, none and undefined are false.
  bool truthy() const;

  /// Python's str(): None, True, 1.5, ['a', 1]; undefined prints as ""; a namespace as
  /// "<Namespace>".
  std::string str() const;
  /// Python's repr() (strings quoted).
  std::string repr() const;
  /// Appends str() to `out`; false (with `out` cut short) as soon as `out` would exceed
  /// `max_bytes`.
  bool append_str(std::string& out, std::size_t max_bytes) const;
  /// Appends repr() to `out`, as append_str.
  bool append_repr(std::string& out, std::size_t max_bytes) const;
  /// Appends Python's json.dumps(x, ensure_ascii=False, indent=indent) as transformers' tojson
  /// calls it to `out`; indent < 0 means none. Fails (with `out` cut short) for an undefined
  /// value or a namespace anywhere inside, or when `out` would exceed `max_bytes`.
  json_error to_json(std::string& out, int indent, std::size_t max_bytes) const;

  /// Python's ==.
  friend bool operator==(const value& a, const value& b);
  friend bool operator!=(const value& a, const value& b) { return !(a == b); }

  /// A name of the kind for error messages ("string", "list", ...).
  const char* type_name() const;

 private:
  json_error append_json(std::string& out, int indent, std::size_t max_bytes, int level) const;

  kind kind_ = kind::undefined;
  bool b_ = false;
  bool namespace_ = false;
  uint32_t depth_ = 0;
  std::size_t weight_ = 0;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const value_list> l_;
  std::shared_ptr<value_map> m_;
};

/// Python's repr() of a float ("1.0", "0.1", "1e+20").
std::string float_repr(double d);

}  // namespace conveyor::chat
