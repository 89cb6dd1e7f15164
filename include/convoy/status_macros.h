// Early-return helpers for absl::Status and absl::StatusOr (abseil 20220623 ships none).
#ifndef CONVOY_STATUS_MACROS_H_
#define CONVOY_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CONVOY_CONCAT_INNER_(a, b) a##b
#define CONVOY_CONCAT_(a, b) CONVOY_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status convoy_status_ = (expr);          \
    if (!convoy_status_.ok()) return convoy_status_; \
  } while (false)

// `ASSIGN_OR_RETURN(auto x, MakeX());` declares and assigns the value, or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(CONVOY_CONCAT_(convoy_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                           \
  if (!statusor.ok()) return statusor.status();     \
  lhs = std::move(statusor).value()

#endif  // CONVOY_STATUS_MACROS_H_
