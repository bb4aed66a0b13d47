// Status and Result<T>: how every internal function reports failure.
// Codes mirror kolo_result_t one to one so the C API can return them unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>
#include <utility>

namespace kolo {

enum class Code : int {
  kOk = 0,
  kInProgress,
  kInvalidArgument,
  kInvalidUsage,
  kMismatch,
  kRemote,
  kTimeout,
  kAborted,
  kUnsupported,
  kSystem,
  kInternal,
};

const char* code_name(Code code);

// Concatenates anything streamable; the one way messages are built.
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// Ok is a null pointer: the success every call returns through a dozen layers costs one
// word to make, move, test and destroy (no string; issue 52). A failure holds its code and
// message on the heap.
class [[nodiscard]] Status {
 public:
  Status() = default;
  // Code::kOk gives an ok Status (its message dropped).
  Status(Code code, std::string message)
      : failure_(code == Code::kOk ? nullptr : new Failure{code, std::move(message)}) {}
  Status(const Status& other) : failure_(other.failure_ ? new Failure(*other.failure_) : nullptr) {}
  Status(Status&& other) noexcept : failure_(other.failure_) { other.failure_ = nullptr; }
  Status& operator=(const Status& other) {
    if (this != &other) *this = Status(other);
    return *this;
  }
  Status& operator=(Status&& other) noexcept {
    if (this != &other) {
      delete failure_;
      failure_ = other.failure_;
      other.failure_ = nullptr;  // a moved-from Status is ok
    }
    return *this;
  }
  ~Status() { delete failure_; }

  static Status ok_status() { return Status(); }
  bool ok() const { return failure_ == nullptr; }
  Code code() const { return failure_ ? failure_->code : Code::kOk; }
  const std::string& message() const { return failure_ ? failure_->message : no_message(); }
  // "<code>: <message>", for logs.
  std::string to_string() const;
  // Prepends context ("allreduce: ") to the message, keeping the code.
  Status with_context(const std::string& context) const;

 private:
  struct Failure {
    Code code;
    std::string message;
  };
  static const std::string& no_message();
  Failure* failure_ = nullptr;
};

template <typename... Args>
Status error(Code code, const Args&... args) {
  return Status(code, str_cat(args...));
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T&& take() { return std::move(*value_); }

 private:
  Status status_;
  std::optional<T> value_;
};

// Ranks for a message: "3,7,9"; three or more in a row as a range, "0,1,3-63"; past `most`
// of those items, "3,7,...(40 more)"; none: "none".
std::string rank_list(const std::vector<int>& ranks, size_t most = 64);
// `x` with `digits` decimals ("5.00"), for messages.
std::string fixed_decimals(double x, int digits);

}  // namespace kolo

// Early return on failure; the only control-flow macro in kolo.
#define KOLO_TRY(expr)                          \
  do {                                          \
    ::kolo::Status kolo_try_status_ = (expr);   \
    if (!kolo_try_status_.ok()) return kolo_try_status_; \
  } while (0)
