#ifndef PSTRAIN_COMMON_STATUS_MACROS_H_
#define PSTRAIN_COMMON_STATUS_MACROS_H_

// Debian's Abseil (20220623) has no status macros; these are the usual two.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PS_STATUS_CONCAT_INNER_(a, b) a##b
#define PS_STATUS_CONCAT_(a, b) PS_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define PS_RETURN_IF_ERROR(expr)                    \
  do {                                              \
    const absl::Status _ps_status = (expr);         \
    if (!_ps_status.ok()) return _ps_status;        \
  } while (0)

// `lhs = value of expr` when `expr` (an absl::StatusOr) is OK; returns its status otherwise.
#define PS_ASSIGN_OR_RETURN(lhs, expr) \
  PS_ASSIGN_OR_RETURN_IMPL_(PS_STATUS_CONCAT_(_ps_statusor_, __LINE__), lhs, expr)

#define PS_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                              \
  if (!statusor.ok()) return statusor.status();        \
  lhs = std::move(statusor).value()

#endif  // PSTRAIN_COMMON_STATUS_MACROS_H_
