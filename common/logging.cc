#include "common/logging.h"

#include <unistd.h>

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(pstrain::LogFormat, log_format, pstrain::LogFormat::kText,
          "Log records on stderr: text (\"I 19:30:01.123 chief] ...\") or json (one object "
          "per line: time, task, level, message, fields)")
    .OnUpdate([] { pstrain::SetLogFormat(absl::GetFlag(FLAGS_log_format)); });

namespace pstrain {
namespace {

std::atomic<LogFormat> log_format{LogFormat::kText};

absl::Mutex tag_mu(absl::kConstInit);
std::string& Tag() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tag_mu) {
  static std::string* tag = new std::string("pstrain");
  return *tag;
}

const char* LevelName(char level) {
  switch (level) {
    case 'W':
      return "warning";
    case 'E':
      return "error";
    default:
      return "info";
  }
}

std::string FieldText(const nlohmann::json& value) {
  // Strings without their quotes unless they hold a space; numbers and the rest as JSON.
  if (value.is_string()) {
    const std::string s = value.get<std::string>();
    return absl::StrContains(s, ' ') ? value.dump() : s;
  }
  return value.dump();
}

void Write(char level, absl::string_view message, const nlohmann::json& fields) {
  std::string tag;
  {
    absl::MutexLock lock(&tag_mu);
    tag = Tag();
  }
  const std::string line =
      FormatLogRecord(GetLogFormat(), level, tag, message, fields) + "\n";
  // One write() per record so lines from several threads never interleave.
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace

void SetLogFormat(LogFormat format) { log_format.store(format); }
LogFormat GetLogFormat() { return log_format.load(); }

std::string FormatLogRecord(LogFormat format, char level, absl::string_view tag,
                            absl::string_view message, const nlohmann::json& fields) {
  const absl::Time now = absl::Now();
  if (format == LogFormat::kJson) {
    nlohmann::json record = {
        {"time", absl::FormatTime("%Y-%m-%dT%H:%M:%E3S%Ez", now, absl::LocalTimeZone())},
        {"task", std::string(tag)},
        {"level", LevelName(level)},
        {"message", std::string(message)}};
    if (fields.is_object() && !fields.empty()) record["fields"] = fields;
    // Invalid UTF-8 (a hostile name echoed in a message) is replaced, never thrown on.
    return record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string line = absl::StrCat(std::string(1, level), " ",
                                  absl::FormatTime("%H:%M:%E3S", now, absl::LocalTimeZone()),
                                  " ", tag, "] ", message);
  if (fields.is_object()) {
    for (const auto& [key, value] : fields.items()) {
      absl::StrAppend(&line, " ", key, "=", FieldText(value));
    }
  }
  return line;
}

char LogRecordLevel(absl::string_view line) {
  if (line.size() >= 2 && line[1] == ' ' && (line[0] == 'I' || line[0] == 'W' || line[0] == 'E')) {
    return line[0];
  }
  if (absl::StartsWith(line, "{")) {
    nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_object() && record.contains("level") && record["level"].is_string()) {
      const std::string level = record["level"].get<std::string>();
      if (level == "info") return 'I';
      if (level == "warning") return 'W';
      if (level == "error") return 'E';
    }
  }
  return 0;
}

void SetLogTag(const std::string& tag) {
  absl::MutexLock lock(&tag_mu);
  Tag() = tag;
}

void LogInfo(absl::string_view message) { Write('I', message, nullptr); }
void LogWarning(absl::string_view message) { Write('W', message, nullptr); }
void LogError(absl::string_view message) { Write('E', message, nullptr); }
void LogWithFields(char level, absl::string_view message, const nlohmann::json& fields) {
  Write(level, message, fields);
}

bool AbslParseFlag(absl::string_view text, LogFormat* format, std::string* error) {
  if (text == "text") {
    *format = LogFormat::kText;
    return true;
  }
  if (text == "json") {
    *format = LogFormat::kJson;
    return true;
  }
  *error = "must be text or json";
  return false;
}

std::string AbslUnparseFlag(LogFormat format) {
  return format == LogFormat::kJson ? "json" : "text";
}

}  // namespace pstrain
