// Errors as values for untrusted input (model files, JSON, CLI, HTTP).
//
// Result<T, E> holds either a T or an E (by default Error, a user-facing message; api/
// uses ApiError, which carries an HTTP status). Status<E> is the Result of an operation
// that returns nothing. Broken invariants are asserts, not errors.
// Header-only, no dependencies: every folder may include it.
//
//   ASSIGN_OR_RETURN(lhs, expr);  // lhs = the value of expr, or return its error
//   SPILLWAY_TRY(expr);           // return the error of expr, if any
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace spillway {

struct Error {
  std::string message;  // complete, user-facing: names the file / tensor / key / field
};

template <class T, class E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(E error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const E& error() const { assert(!ok()); return std::get<1>(v_); }

 private:
  std::variant<T, E> v_;
};

// Success or an E.
template <class E = Error>
class [[nodiscard]] BasicStatus {
 public:
  BasicStatus() = default;
  BasicStatus(E error) : error_(std::move(error)), failed_(true) {}  // NOLINT: implicit by design
  static BasicStatus Ok() { return {}; }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const E& error() const { assert(failed_); return error_; }

 private:
  E error_{};
  bool failed_ = false;
};

using Status = BasicStatus<Error>;

}  // namespace spillway

#define SPILLWAY_CAT2(a, b) a##b
#define SPILLWAY_CAT(a, b) SPILLWAY_CAT2(a, b)

// Propagate an error from an expression returning a Result or a Status.
#define SPILLWAY_TRY(expr)                                                \
  do {                                                                    \
    auto&& spillway_try_result_ = (expr);                                 \
    if (!spillway_try_result_.ok()) return spillway_try_result_.error(); \
  } while (0)

// `ASSIGN_OR_RETURN(lhs, expr);` assigns the value of a Result-returning expr to lhs (an
// existing lvalue or a declaration such as `auto x`), or returns its error from the
// enclosing function (which returns a Result or a Status of the same error type).
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(SPILLWAY_CAT(spillway_result_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.error();          \
  lhs = std::move(tmp).value()
