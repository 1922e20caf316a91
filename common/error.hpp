// Conveyor's errors: one enum for every way a request or a start-up can fail, a plain error (code
// and message) and `expected<T>`, a value or an error. No actor framework: actors/caf_error.hpp
// converts to and from CAF's errors where actors hand errors to CAF.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace conveyor {

/// Every error Conveyor reports. 0 is "no error" (CAF's rule too: the code travels in its errors).
enum class ec : uint8_t {
  /// No error.
  none = 0,
  /// The input is malformed or out of range (a field, a flag, a request body).
  bad_request,
  /// A prompt with its max_tokens does not fit in the context.
  prompt_too_long,
  /// The waiting queue is full (by requests or by tokens).
  rejected_queue_full,
  /// The request's deadline passed before it finished.
  expired,
  /// The client cancelled the request or went away.
  cancelled,
  /// The executor running the request was lost.
  executor_lost,
  /// The server is draining and takes no new work.
  shutting_down,
  /// A file could not be read or has the wrong format or size.
  bad_file,
  /// A configuration key is unknown, of the wrong type or impossible.
  bad_config,
  /// The model could not be loaded or run.
  model_failure,
  /// Anything else that went wrong inside Conveyor.
  internal,
};

/// Returns the name of `x`, e.g. "rejected_queue_full".
const char* to_string(ec x);

/// An error: a code and one human-readable message. A default-constructed error (code
/// `ec::none`) is "no error" and converts to false, so a function that may fail without a value
/// returns `error` and its caller writes `if (auto err = f()) ...`.
struct error {
  /// What kind of failure; `ec::none` means no error.
  ec code = ec::none;
  /// What went wrong, naming the file, key or field; empty for no error.
  std::string message;

  /// No error.
  error() = default;

  /// An error of `code` with `message`.
  error(ec code, std::string message) : code(code), message(std::move(message)) {}

  /// True when this is an error (the code is not `ec::none`).
  explicit operator bool() const noexcept { return code != ec::none; }

  /// True when this is no error.
  bool operator!() const noexcept { return code == ec::none; }
};

/// Errors are equal when code and message are.
bool operator==(const error& x, const error& y);

/// Errors differ when code or message do.
bool operator!=(const error& x, const error& y);

/// Renders `x` as "code: message" ("bad_config: conveyor.toml:3: ..."), "code" when the message
/// is empty, "none" for no error.
std::string to_string(const error& x);

/// Writes `to_string(x)` (what GoogleTest prints for an error).
std::ostream& operator<<(std::ostream& out, const error& x);

/// Makes an error with one human-readable message.
error make_error(ec code, std::string message);

/// Returns the code of `err`, `ec::none` for no error.
ec code_of(const error& err);

/// Returns the message of `err`, empty for no error.
std::string message_of(const error& err);

/// A value of type `T` or the error that kept it from being made. Constructed implicitly from
/// either, so a function returning `expected<T>` writes `return value;` or
/// `return make_error(...)`, and its caller `if (!x) return x.error();` then `*x` or `x->`.
/// Move-only values work (`expected<std::unique_ptr<T>>`).
template <class T>
class expected {
 public:
  static_assert(!std::is_reference_v<T>, "expected<T&> is not supported");
  static_assert(!std::is_same_v<std::decay_t<T>, conveyor::error>, "expected<error> is ambiguous");

  /// The type of the value.
  using value_type = T;

  /// Holds a value made from `x` (anything that converts to `T`).
  template <class U = T,
            class = std::enable_if_t<std::is_convertible_v<U&&, T> &&
                                     !std::is_same_v<std::decay_t<U>, expected> &&
                                     !std::is_same_v<std::decay_t<U>, conveyor::error>>>
  expected(U&& x) : state_(std::in_place_index<0>, std::forward<U>(x)) {}

  /// Holds the error `err`.
  expected(conveyor::error err) : state_(std::in_place_index<1>, std::move(err)) {}

  /// True when this holds a value.
  explicit operator bool() const noexcept { return state_.index() == 0; }

  /// True when this holds an error.
  bool operator!() const noexcept { return state_.index() != 0; }

  /// The value; throws std::bad_variant_access when this holds an error.
  T& value() & { return std::get<0>(state_); }
  /// The value; throws std::bad_variant_access when this holds an error.
  const T& value() const& { return std::get<0>(state_); }
  /// The value, moved out; throws std::bad_variant_access when this holds an error.
  T&& value() && { return std::get<0>(std::move(state_)); }

  /// The value (see value()).
  T& operator*() & { return value(); }
  /// The value (see value()).
  const T& operator*() const& { return value(); }
  /// The value, moved out (see value()).
  T&& operator*() && { return std::move(*this).value(); }

  /// The value's members (see value()).
  T* operator->() { return &value(); }
  /// The value's members (see value()).
  const T* operator->() const { return &value(); }

  /// The error; throws std::bad_variant_access when this holds a value.
  conveyor::error& error() & { return std::get<1>(state_); }
  /// The error; throws std::bad_variant_access when this holds a value.
  const conveyor::error& error() const& { return std::get<1>(state_); }
  /// The error, moved out; throws std::bad_variant_access when this holds a value.
  conveyor::error&& error() && { return std::get<1>(std::move(state_)); }

 private:
  std::variant<T, conveyor::error> state_;
};

/// Success without a value, or an error.
template <>
class expected<void> {
 public:
  /// The type of the value.
  using value_type = void;

  /// Success.
  expected() = default;

  /// Holds `err`; a default-constructed `error` (no error) makes success.
  expected(conveyor::error err) : error_(std::move(err)) {}

  /// True on success.
  explicit operator bool() const noexcept { return !error_; }

  /// True when this holds an error.
  bool operator!() const noexcept { return static_cast<bool>(error_); }

  /// The error; no error on success.
  conveyor::error& error() & { return error_; }
  /// The error; no error on success.
  const conveyor::error& error() const& { return error_; }
  /// The error, moved out; no error on success.
  conveyor::error&& error() && { return std::move(error_); }

 private:
  conveyor::error error_;
};

}  // namespace conveyor
