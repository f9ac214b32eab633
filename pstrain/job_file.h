#ifndef PSTRAIN_PSTRAIN_JOB_FILE_H_
#define PSTRAIN_PSTRAIN_JOB_FILE_H_

// A job spec file (common/model/job_spec.h), read as `train` and the chief read it, for a
// loop of one's own: its model and compile settings (ModelOptions::FromJobSpec), its fit
// settings and seed, and its data.

#include <string>

#include "absl/status/statusor.h"
#include "common/model/job_spec.h"
#include "pstrain/fit.h"

namespace pstrain::distribute {

using ::pstrain::FitData;  // train (required) and validation (null when none)
using ::pstrain::JobSpec;

struct JobFile {
  JobSpec spec;
  std::string base_dir;  // the file's folder: relative paths in it are relative to this
};

// Errors: NOT_FOUND the file cannot be read; INVALID_ARGUMENT ParseJobSpec's, prefixed
// with the path.
absl::StatusOr<JobFile> ReadJobFile(const std::string& path);

// The job's data.train and data.validation, loaded (LoadFitData: "one_hot_labels"
// applied). Errors: LoadFitData's.
absl::StatusOr<FitData> LoadJobData(const JobFile& job);

}  // namespace pstrain::distribute

#endif  // PSTRAIN_PSTRAIN_JOB_FILE_H_
