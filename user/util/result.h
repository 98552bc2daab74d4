// SPDX-License-Identifier: Apache-2.0
// Errors as values: every fallible step returns Result<T> (C++20 has no
// std::expected). An error carries one human sentence, ready to print.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace steptrace {

struct Error {
  std::string message;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error err) : v_(std::move(err)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<T>(v_); }
  const T& value() const { return std::get<T>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<Error>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>
struct Ok {};
using Status = Result<Ok>;

inline Error make_error(std::string msg) { return Error{std::move(msg)}; }

}  // namespace steptrace
