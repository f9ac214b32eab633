// evaluate: test loss and accuracy of a checkpoint's weights, or of a .keras model's,
// without a cluster.
//
//   evaluate --checkpoint=DIR|PATH [--data=test|train]
//   evaluate --job=JOB.json [--data=test|train]    (the job's "model" a .keras file)
//
// DIR is a --checkpoint_dir (its newest good checkpoint is used), PATH one checkpoint.
// The model, loss and data come from the job spec stored in the checkpoint, or from JOB.
// A checkpoint is evaluated as the evaluator task evaluates it (the same code and batches,
// so the same figures): a sharded one from its shard files in bounded memory, dense
// variables whole and of an Embedding table only each validation batch's rows.
// Exit codes: 0 done, 1 the checkpoint, model or data could not be used (the reason is
// printed), 2 bad usage.

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/daemon/command_line.h"
#include "common/process_memory.h"
#include "common/model/job_spec.h"
#include "ps_server/client/checkpoint_evaluation.h"
#include "tools/evaluate_lib.h"

ABSL_FLAG(std::string, checkpoint, "", "A checkpoint directory, or a --checkpoint_dir");
ABSL_FLAG(std::string, job, "", "A job spec whose \"model\" is a .keras file (instead of --checkpoint)");
ABSL_FLAG(std::string, data, "test",
          "test (the job's validation data) or train (its training data)");

ABSL_FLAG(bool, print_peak_memory, false,
          "At the end, print this process's peak resident memory (VmHWM) on stderr");

namespace {

void PrintResult(const std::string& what, const pstrain::EvaluationResult& result) {
  const std::string data = absl::GetFlag(FLAGS_data);
  std::printf("%s: %s loss: %.4f - %s accuracy: %.4f - %lld examples\n", what.c_str(),
              data.c_str(), result.loss, data.c_str(), result.accuracy,
              static_cast<long long>(result.samples));
  if (absl::GetFlag(FLAGS_print_peak_memory)) {
    std::fprintf(stderr, "%s\n", pstrain::PeakMemoryLine().c_str());
  }
}

int EvaluateJob(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "evaluate: cannot read job spec %s\n", path.c_str());
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  const size_t slash = path.rfind('/');
  const std::string job_dir = slash == std::string::npos ? "." : path.substr(0, slash);
  absl::StatusOr<pstrain::JobSpec> job = pstrain::ParseJobSpec(text.str(), job_dir);
  absl::StatusOr<pstrain::EvaluationResult> result =
      job.ok() ? pstrain::EvaluateKerasJob(*job, job_dir, absl::GetFlag(FLAGS_data))
               : absl::StatusOr<pstrain::EvaluationResult>(job.status());
  if (!result.ok()) {
    std::fprintf(stderr, "evaluate: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  PrintResult(path, *result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  pstrain::ParseCommandLineWithUsage(
      argc, argv,
      "evaluate --checkpoint=DIR|PATH | --job=JOB.json (a .keras model) [--data=test|train]");
  const std::string path = absl::GetFlag(FLAGS_checkpoint);
  const std::string job = absl::GetFlag(FLAGS_job);
  if (path.empty() == job.empty()) {
    std::fprintf(stderr, "evaluate: give one of --checkpoint and --job\n");
    return 2;
  }
  if (!job.empty()) return EvaluateJob(job);
  absl::StatusOr<std::unique_ptr<pstrain::CheckpointReader>> checkpoint =
      pstrain::CheckpointReader::Open(path, {/*load_sharded_tensors=*/false});
  if (!checkpoint.ok()) {
    std::fprintf(stderr, "evaluate: %s\n", std::string(checkpoint.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<pstrain::EvaluationResult> result =
      pstrain::EvaluateCheckpoint(**checkpoint, absl::GetFlag(FLAGS_data));
  if (!result.ok()) {
    std::fprintf(stderr, "evaluate: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  PrintResult(absl::StrCat((*checkpoint)->path(), " (epoch ", (*checkpoint)->epoch(), ", step ",
                           (*checkpoint)->step(), ")"),
              *result);
  return 0;
}
