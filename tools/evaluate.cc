// evaluate: test loss and accuracy of a checkpoint's weights, without a cluster.
//
//   evaluate --checkpoint=DIR|PATH [--data=test|train]
//
// DIR is a --checkpoint_dir (its newest good checkpoint is used), PATH one checkpoint.
// The model, loss and data come from the job spec stored in the checkpoint.
// Exit codes: 0 done, 1 the checkpoint or data could not be used (the reason is printed),
// 2 bad usage.

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "common/checkpoint/checkpoint.h"
#include "common/command_line.h"
#include "tools/evaluate_lib.h"

ABSL_FLAG(std::string, checkpoint, "", "A checkpoint directory, or a --checkpoint_dir");
ABSL_FLAG(std::string, data, "test",
          "test (the job's validation data) or train (its training data)");

int main(int argc, char** argv) {
  pstrain::ParseCommandLineWithUsage(
      argc, argv, "evaluate --checkpoint=DIR|PATH [--data=test|train]");
  const std::string path = absl::GetFlag(FLAGS_checkpoint);
  if (path.empty()) {
    std::fprintf(stderr, "evaluate: --checkpoint is required\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<pstrain::CheckpointReader>> checkpoint =
      pstrain::CheckpointReader::Open(path);
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
  std::printf("%s (epoch %d, step %lld): %s loss: %.4f - %s accuracy: %.4f - %lld examples\n",
              (*checkpoint)->path().c_str(), (*checkpoint)->epoch(),
              static_cast<long long>((*checkpoint)->step()), absl::GetFlag(FLAGS_data).c_str(),
              result->loss, absl::GetFlag(FLAGS_data).c_str(), result->accuracy,
              static_cast<long long>(result->samples));
  return 0;
}
