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
          "Where checkpoints are written (at every epoch end, at the end of the job, and "
          "as the --checkpoint_every* flags and SaveCheckpoint requests say); empty = none");
ABSL_FLAG(int64_t, checkpoint_every_steps, 0,
          "Also write a checkpoint every this many global steps (0 = never)");
ABSL_FLAG(absl::Duration, checkpoint_every, absl::ZeroDuration(),
          "Also write a checkpoint at this interval, e.g. 10m (0 = never)");
ABSL_FLAG(bool, checkpoint_every_epoch, true, "Write a checkpoint at every epoch end");
ABSL_FLAG(bool, consistent_checkpoints, true,
          "A mid-epoch checkpoint pauses the workers between chunks, so every shard is of "
          "one step; false reads the ps while they push");
ABSL_FLAG(absl::Duration, ps_recovery_timeout, absl::Seconds(120),
          "How long training waits for a failed ps to come back (its shards are then "
          "restored from the latest checkpoint) before the job fails");
ABSL_FLAG(absl::Duration, testing_checkpoint_commit_delay, absl::ZeroDuration(),
          "Fault injection for tests: pause before committing each checkpoint");
ABSL_FLAG(int, keep_checkpoints, 3, "Checkpoints kept in --checkpoint_dir");
ABSL_FLAG(std::string, export_keras, "",
          "At the end of the job, write the trained model (the weights the ps tasks hold) as "
          "a Keras 3 .keras file at this path; empty = none");
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
  options.checkpoint_every_steps = absl::GetFlag(FLAGS_checkpoint_every_steps);
  options.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  options.checkpoint_every_epoch = absl::GetFlag(FLAGS_checkpoint_every_epoch);
  options.consistent_checkpoints = absl::GetFlag(FLAGS_consistent_checkpoints);
  options.checkpoint_commit_delay = absl::GetFlag(FLAGS_testing_checkpoint_commit_delay);
  options.ps_recovery_timeout = absl::GetFlag(FLAGS_ps_recovery_timeout);
  options.export_keras = absl::GetFlag(FLAGS_export_keras);
  if (options.checkpoint_every_steps < 0 || options.checkpoint_every < absl::ZeroDuration()) {
    std::fprintf(stderr, "chief: --checkpoint_every_steps and --checkpoint_every must be >= 0\n");
    return 2;
  }
  if (options.steps_per_call < 1) {
    std::fprintf(stderr, "chief: --steps_per_call must be at least 1\n");
    return 2;
  }
  pstrain::ShutdownSignal shutdown;
  pstrain::ShutdownSignal::InstallHandlers(&shutdown);
  return pstrain::RunChiefTask(options, &shutdown, std::cout);
}
