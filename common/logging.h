#ifndef PSTRAIN_COMMON_LOGGING_H_
#define PSTRAIN_COMMON_LOGGING_H_

#include <string>

#include "absl/strings/string_view.h"

namespace pstrain {

// One-line log records on stderr, "I 19:30:01.123 worker0] message". stdout is kept for
// what the user reads (epoch lines). Thread-safe: each record is written with one call.
void SetLogTag(const std::string& tag);
void LogInfo(absl::string_view message);
// Something went wrong and was dealt with (a task came back, a ps was restored): worth a
// user's eye, not a failure. The launcher shows these with errors.
void LogWarning(absl::string_view message);
void LogError(absl::string_view message);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_LOGGING_H_
