#include "common/logging.h"

#include <unistd.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace pstrain {
namespace {

absl::Mutex tag_mu;
std::string& Tag() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tag_mu) {
  static std::string* tag = new std::string("pstrain");
  return *tag;
}

void Write(char level, absl::string_view message) {
  std::string tag;
  {
    absl::MutexLock lock(&tag_mu);
    tag = Tag();
  }
  const std::string line =
      absl::StrCat(std::string(1, level), " ",
                   absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone()), " ",
                   tag, "] ", message, "\n");
  // One write() per record so lines from several threads never interleave.
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace

void SetLogTag(const std::string& tag) {
  absl::MutexLock lock(&tag_mu);
  Tag() = tag;
}

void LogInfo(absl::string_view message) { Write('I', message); }
void LogWarning(absl::string_view message) { Write('W', message); }
void LogError(absl::string_view message) { Write('E', message); }

}  // namespace pstrain
