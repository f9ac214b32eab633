#ifndef PSTRAIN_COMMON_TENSORBOARD_EVENT_FILE_WRITER_H_
#define PSTRAIN_COMMON_TENSORBOARD_EVENT_FILE_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pstrain {

// TFRecord framing of one record: length (uint64 LE), masked CRC-32C of the length,
// the bytes, masked CRC-32C of the bytes (TensorFlow's record_writer).
std::string FrameTfRecord(absl::string_view data);

// TensorFlow's masked CRC: rotate right by 15 bits and add 0xa282ead8, so that a CRC of
// data holding CRCs does not degenerate.
uint32_t MaskCrc32c(uint32_t crc);

// One TensorBoard event file, "events.out.tfevents.<seconds>.<host>.<pid>.<n>.v2" in a
// folder (created, with its parents, when missing), as TensorFlow's summary writer names
// them. The first record is the "brain.Event:2" version event; each WriteScalars is one
// Event with a Summary of simple_value scalars, flushed at once so a TensorBoard that
// reads the folder while training runs sees it.
//
// Thread-safe.
class EventFileWriter {
 public:
  // Errors: INTERNAL the folder or the file cannot be created (naming it).
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Create(const std::string& dir);
  ~EventFileWriter();

  // Errors: INTERNAL the write failed (the file is named; later writes are tried again).
  absl::Status WriteScalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars,
                            absl::Time wall_time = absl::Now()) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& path() const { return path_; }

 private:
  EventFileWriter(std::string path, FILE* file) : path_(std::move(path)), file_(file) {}
  absl::Status WriteRecord(const std::string& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  absl::Mutex mu_;
  FILE* file_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TENSORBOARD_EVENT_FILE_WRITER_H_
