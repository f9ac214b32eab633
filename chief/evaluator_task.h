#ifndef PSTRAIN_CHIEF_EVALUATOR_TASK_H_
#define PSTRAIN_CHIEF_EVALUATOR_TASK_H_

// TF_CONFIG's "evaluator" task (TensorFlow's side-car evaluator: tf.estimator's
// evaluator job, Keras' SidecarEvaluator), run by the chief binary: it watches the job's
// --checkpoint_dir and evaluates every new committed checkpoint from its files, with no
// ps, no RPC and no port of its own (it need not be listed in the cluster, TF's rule).
//
// For each checkpoint "ckpt-<step>" newer than the last one it took (a writer's temporary
// folder is never one: it is renamed to that name only once complete, so a partial
// checkpoint is never read; each step once), in order of steps, it
//   1. evaluates the weights on the job's validation data as tools/evaluate does
//      (ps_server/client/checkpoint_evaluation.h: the same code, so the same figures; a
//      sharded checkpoint read in bounded memory, an Embedding table by each batch's rows);
//   2. prints one line, "evaluated DIR/ckpt-S (epoch E, step S): loss: L - accuracy: A -
//      N examples", and logs it;
//   3. writes the figures to TensorBoard's `eval` run under --logdir (Keras' layout:
//      DIR/eval, tags evaluation_loss_vs_iterations and evaluation_accuracy_vs_iterations
//      at the checkpoint's global step, as Keras' TensorBoard callback names figures by
//      iteration);
//   4. sets its metrics: pstrain_eval_loss, pstrain_eval_accuracy,
//      pstrain_eval_checkpoint_step, pstrain_eval_checkpoints_total,
//      pstrain_eval_failures_total.
// A checkpoint that cannot be read (a corrupt shard file, a wrong shape) is logged in one
// line naming it and the file, counted, and skipped; the next one is evaluated.
//
// It ends, exit 0, once it has evaluated the job's final checkpoint (one of as many epochs
// as its job spec's fit.epochs: the chief writes one at the end of every job that trained
// to its end), as TF's evaluator stops after the last checkpoint; on SIGTERM/SIGINT (exit
// 0, after the checkpoint in progress); or when no new checkpoint came for --eval_timeout
// (when set; exit 1, naming the folder).
//
// Thread-safety: RunEvaluatorTask runs on the daemon's main thread.

#include <iosfwd>
#include <string>

#include "absl/time/time.h"
#include "common/daemon/daemon_runtime.h"

namespace pstrain {

struct EvaluatorOptions {
  // The chief's --checkpoint_dir. Required; it may not exist yet (the chief creates it).
  std::string checkpoint_dir;
  // --logdir; empty: no TensorBoard files.
  std::string logdir;
  // How often the folder is looked at.
  absl::Duration poll_interval = absl::Seconds(1);
  // Zero: wait for checkpoints for ever (until the final one or a signal).
  absl::Duration timeout = absl::ZeroDuration();
};

// Runs the evaluator until the job's final checkpoint is evaluated, a signal, or the
// timeout; the evaluation lines go to `out`. Returns the exit code: 0 as above; 1 the
// timeout passed or TensorBoard's folder cannot be written; 2 no checkpoint_dir.
int RunEvaluatorTask(const EvaluatorOptions& options, DaemonRuntime* runtime, std::ostream& out);

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_EVALUATOR_TASK_H_
