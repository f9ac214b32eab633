#include "chief/chief_flags.h"

#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "chief/evaluator_task.h"
#include "common/cluster_spec.h"
#include "common/daemon/exit_codes.h"
#include "common/logging.h"
#include "common/tensorboard/tensorboard_flags.h"

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
ABSL_FLAG(absl::Duration, eval_timeout, absl::ZeroDuration(),
          "Evaluator task: give up (exit 1) when no new checkpoint came for this long "
          "(0 = wait until the job's final checkpoint or a signal)");
ABSL_FLAG(absl::Duration, eval_poll_interval, absl::Seconds(1),
          "Evaluator task: how often --checkpoint_dir is looked at for new checkpoints");
ABSL_FLAG(std::string, restore, "latest",
          "latest (the newest good checkpoint in --checkpoint_dir, else a fresh start), "
          "none, or the path of a checkpoint to continue from");

namespace pstrain {

absl::StatusOr<ChiefOptions> ChiefOptionsFromFlags() {
  ChiefOptions options;
  options.job_path = absl::GetFlag(FLAGS_job);
  options.epochs_override = absl::GetFlag(FLAGS_epochs);
  options.consistency_override = absl::GetFlag(FLAGS_consistency);
  options.staleness_override = absl::GetFlag(FLAGS_staleness);
  options.steps_per_call = absl::GetFlag(FLAGS_steps_per_call);
  options.run_steps_timeout = absl::GetFlag(FLAGS_run_steps_timeout);
  options.checkpoint.dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.checkpoint.keep = absl::GetFlag(FLAGS_keep_checkpoints);
  options.restore = absl::GetFlag(FLAGS_restore);
  options.checkpoint.every_steps = absl::GetFlag(FLAGS_checkpoint_every_steps);
  options.checkpoint.every = absl::GetFlag(FLAGS_checkpoint_every);
  options.checkpoint_every_epoch = absl::GetFlag(FLAGS_checkpoint_every_epoch);
  options.consistent_checkpoints = absl::GetFlag(FLAGS_consistent_checkpoints);
  options.checkpoint.commit_delay = absl::GetFlag(FLAGS_testing_checkpoint_commit_delay);
  options.ps_recovery_timeout = absl::GetFlag(FLAGS_ps_recovery_timeout);
  options.export_keras = absl::GetFlag(FLAGS_export_keras);
  if (options.checkpoint.every_steps < 0 || options.checkpoint.every < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--checkpoint_every_steps and --checkpoint_every must be >= 0");
  }
  if (options.steps_per_call < 1) {
    return absl::InvalidArgumentError("--steps_per_call must be at least 1");
  }
  return options;
}

absl::StatusOr<EvaluatorOptions> EvaluatorOptionsFromFlags() {
  EvaluatorOptions options;
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.logdir = TensorBoardLogdirFromFlags();
  options.timeout = absl::GetFlag(FLAGS_eval_timeout);
  options.poll_interval = absl::GetFlag(FLAGS_eval_poll_interval);
  if (options.timeout < absl::ZeroDuration() || options.poll_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--eval_timeout must be >= 0 and --eval_poll_interval more than 0");
  }
  return options;
}

int RunChiefFromFlags(DaemonRuntime* runtime) {
  // TF runs one program on every task: this binary is also TF_CONFIG's evaluator.
  if (runtime->options().config.task.type == Role::kEvaluator) {
    absl::StatusOr<EvaluatorOptions> evaluator = EvaluatorOptionsFromFlags();
    if (!evaluator.ok()) {
      LogError(evaluator.status().message());
      return kExitBadConfiguration;
    }
    return RunEvaluatorTask(*evaluator, runtime, std::cout);
  }
  absl::StatusOr<ChiefOptions> options = ChiefOptionsFromFlags();
  if (!options.ok()) {
    LogError(options.status().message());
    return kExitBadConfiguration;
  }
  return RunChiefTask(*options, runtime, std::cout);
}

}  // namespace pstrain
