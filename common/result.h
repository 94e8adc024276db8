// Errors as values for untrusted input (model files, JSON, CLI, HTTP).
//
// Result<T> holds either a T or an Error. Broken invariants are asserts, not Errors.
// Header-only, no dependencies: every folder may include it.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace spillway {

struct Error {
  std::string message;  // complete, user-facing: names the file / tensor / key / field
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}      // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { assert(!ok()); return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), failed_(true) {}  // NOLINT
  static Status Ok() { return {}; }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { assert(failed_); return error_; }

 private:
  Error error_;
  bool failed_ = false;
};

}  // namespace spillway

// Propagate an error from an expression returning Result/Status.
#define SPILLWAY_TRY(expr)                                   \
  do {                                                        \
    auto&& spillway_try_result_ = (expr);                     \
    if (!spillway_try_result_.ok()) return spillway_try_result_.error(); \
  } while (0)
