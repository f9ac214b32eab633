// chief: coordinates a pstrain job. Waits for every ps and worker task, creates the
// variables, hands out work, prints one line per epoch and shuts the cluster down.
// Configured by TF_CONFIG (or --cluster/--task_type/--task_index) and --job.

#include <cstdio>
#include <iostream>

#include "absl/flags/flag.h"
#include "chief/chief_task.h"
#include "common/command_line.h"
#include "common/daemon_flags.h"
#include "common/logging.h"
#include "common/malloc_tuning.h"
#include "common/shutdown_signal.h"

ABSL_FLAG(std::string, job, "", "Job spec (JSON): model, compile, fit, data");
ABSL_FLAG(int, epochs, 0, "Overrides fit.epochs of the job spec when > 0");
ABSL_FLAG(std::string, consistency, "",
          "Overrides the job's consistency mode: async, bounded_staleness or sync");
ABSL_FLAG(int, staleness, -1, "Overrides the job's bounded-staleness bound when >= 0");
ABSL_FLAG(int64_t, steps_per_call, 100,
          "Training steps a worker runs per request from the chief");
ABSL_FLAG(absl::Duration, run_steps_timeout, absl::Minutes(10),
          "Deadline for one request of steps_per_call steps");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Where a checkpoint is written at the end of every epoch; empty = none");
ABSL_FLAG(int, keep_checkpoints, 3, "Checkpoints kept in --checkpoint_dir");
ABSL_FLAG(std::string, restore, "latest",
          "latest (the newest good checkpoint in --checkpoint_dir, else a fresh start), "
          "none, or the path of a checkpoint to continue from");

int main(int argc, char** argv) {
  pstrain::ParseCommandLineWithUsage(argc, argv,
      "pstrain chief: coordinates training.\n"
      "  TF_CONFIG='{\"cluster\":{...},\"task\":{\"type\":\"chief\",\"index\":0}}' "
      "chief --job=examples/seed_synthetic.json");
  // Tensors travel in messages of hundreds of KiB to MiBs, allocated per request.
  pstrain::KeepLargeBlocksInHeap();
  absl::StatusOr<pstrain::DaemonOptions> daemon = pstrain::DaemonOptionsFromFlags("chief");
  if (!daemon.ok()) {
    std::fprintf(stderr, "chief: %s\n", std::string(daemon.status().message()).c_str());
    return 2;
  }
  pstrain::SetLogTag("chief");
  pstrain::ChiefOptions options;
  options.daemon = *daemon;
  options.job_path = absl::GetFlag(FLAGS_job);
  options.epochs_override = absl::GetFlag(FLAGS_epochs);
  options.consistency_override = absl::GetFlag(FLAGS_consistency);
  options.staleness_override = absl::GetFlag(FLAGS_staleness);
  options.steps_per_call = absl::GetFlag(FLAGS_steps_per_call);
  options.run_steps_timeout = absl::GetFlag(FLAGS_run_steps_timeout);
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.keep_checkpoints = absl::GetFlag(FLAGS_keep_checkpoints);
  options.restore = absl::GetFlag(FLAGS_restore);
  if (options.steps_per_call < 1) {
    std::fprintf(stderr, "chief: --steps_per_call must be at least 1\n");
    return 2;
  }
  pstrain::ShutdownSignal shutdown;
  pstrain::ShutdownSignal::InstallHandlers(&shutdown);
  return pstrain::RunChiefTask(options, &shutdown, std::cout);
}
