#ifndef PSTRAIN_COMMON_LOGGING_H_
#define PSTRAIN_COMMON_LOGGING_H_

#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"

namespace pstrain {

// One-line log records on stderr. stdout is kept for what the user reads (epoch lines).
// Thread-safe: each record is written with one call.
//
// Two formats, chosen by --log_format (every binary that logs takes it) or SetLogFormat:
//   text (default): "I 19:30:01.123 worker0] message key=value ..."
//   json: one JSON object per line, for log collectors (Loki, Elasticsearch, Cloud
//         Logging): {"time":"2026-12-01T19:30:01.123+00:00","task":"worker0",
//         "level":"info","message":"...","fields":{...}}; "fields" only when given.
enum class LogFormat { kText, kJson };
void SetLogFormat(LogFormat format);
LogFormat GetLogFormat();

void SetLogTag(const std::string& tag);
void LogInfo(absl::string_view message);
// Something went wrong and was dealt with (a task came back, a ps was restored): worth a
// user's eye, not a failure. The launcher shows these with errors.
void LogWarning(absl::string_view message);
void LogError(absl::string_view message);
// A record with structured facts: `fields` (a JSON object) keep numbers as numbers in
// JSON lines; in text they follow the message as key=value. `level` is 'I', 'W' or 'E'.
void LogWithFields(char level, absl::string_view message, const nlohmann::json& fields);

// The record as it is written (without the newline); exposed for tests.
std::string FormatLogRecord(LogFormat format, char level, absl::string_view tag,
                            absl::string_view message, const nlohmann::json& fields);

// The level letter of a record written by any pstrain binary in either format ('I', 'W',
// 'E'), or 0 when `line` is not such a record (a launcher sorts its tasks' lines by it).
char LogRecordLevel(absl::string_view line);

// Flag parsing for --log_format (Abseil calls these).
bool AbslParseFlag(absl::string_view text, LogFormat* format, std::string* error);
std::string AbslUnparseFlag(LogFormat format);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_LOGGING_H_
