#include "pstrain/job_file.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain::distribute {

absl::StatusOr<JobFile> ReadJobFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read the job spec"));
  std::stringstream text;
  text << in.rdbuf();
  JobFile job;
  const size_t slash = path.rfind('/');
  job.base_dir = slash == std::string::npos ? "." : path.substr(0, slash);
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text.str(), job.base_dir);
  if (!spec.ok()) {
    return absl::Status(spec.status().code(), absl::StrCat(path, ": ", spec.status().message()));
  }
  job.spec = *std::move(spec);
  return job;
}

absl::StatusOr<FitData> LoadJobData(const JobFile& job) {
  return LoadFitData(job.spec, job.base_dir);
}

}  // namespace pstrain::distribute
