#include "chief/evaluator_task.h"

#include <cstdio>
#include <memory>
#include <ostream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint.h"
#include "common/daemon/exit_codes.h"
#include "common/logging.h"
#include "common/metrics/metrics_registry.h"
#include "common/tensorboard/event_file_writer.h"
#include "nlohmann/json.hpp"
#include "ps_server/client/checkpoint_evaluation.h"

namespace pstrain {

namespace {

// The figures the evaluator exports on its metrics port.
struct EvaluatorMetrics {
  explicit EvaluatorMetrics(MetricsRegistry* registry)
      : loss(registry->AddGauge("pstrain_eval_loss",
                                "Validation loss of the last checkpoint evaluated")),
        accuracy(registry->AddGauge("pstrain_eval_accuracy",
                                    "Validation accuracy of the last checkpoint evaluated")),
        step(registry->AddGauge("pstrain_eval_checkpoint_step",
                                "Global step of the last checkpoint evaluated")),
        evaluated(registry->AddCounter("pstrain_eval_checkpoints_total",
                                       "Checkpoints evaluated")),
        failures(registry->AddCounter("pstrain_eval_failures_total",
                                      "Checkpoints skipped because they could not be read or "
                                      "did not fit their model")) {}
  prometheus::Gauge& loss;
  prometheus::Gauge& accuracy;
  prometheus::Gauge& step;
  prometheus::Counter& evaluated;
  prometheus::Counter& failures;
};

// fit.epochs of the job a checkpoint was written by; 0 when it does not say.
int64_t JobEpochs(const CheckpointReader& checkpoint) {
  const nlohmann::json& job = checkpoint.job_spec();
  if (!job.is_object() || !job.contains("fit") || !job["fit"].is_object()) return 0;
  const nlohmann::json& fit = job["fit"];
  return fit.contains("epochs") && fit["epochs"].is_number_integer() ? fit["epochs"].get<int64_t>()
                                                                      : 0;
}

class EvaluatorLoop {
 public:
  EvaluatorLoop(const EvaluatorOptions& options, DaemonRuntime* runtime, std::ostream& out,
                std::unique_ptr<EventFileWriter> events)
      : options_(options),
        runtime_(runtime),
        out_(out),
        events_(std::move(events)),
        metrics_(runtime->metrics()->registry()) {}

  // Until the final checkpoint, a signal or the timeout; the exit code.
  int Run() {
    LogInfo(absl::StrCat("evaluator: evaluating every new checkpoint in ",
                         options_.checkpoint_dir));
    absl::Time last_new = absl::Now();
    while (!runtime_->shutdown()->requested()) {
      bool any = false;
      // Oldest first: every checkpoint once, in the order training wrote them.
      std::vector<std::pair<int64_t, std::string>> found = ListCheckpoints(options_.checkpoint_dir);
      for (auto it = found.rbegin(); it != found.rend(); ++it) {
        if (it->first <= last_step_ || runtime_->shutdown()->requested()) continue;
        any = true;
        last_step_ = it->first;
        if (EvaluateOne(absl::StrCat(options_.checkpoint_dir, "/", it->second))) {
          LogInfo("evaluator: the job's final checkpoint is evaluated; done");
          return kExitOk;
        }
      }
      if (any) last_new = absl::Now();
      if (options_.timeout > absl::ZeroDuration() && absl::Now() - last_new > options_.timeout) {
        LogError(absl::StrCat("evaluator: no new checkpoint in ", options_.checkpoint_dir,
                              " for ", absl::FormatDuration(options_.timeout), "; giving up"));
        return kExitFailure;
      }
      runtime_->shutdown()->WaitFor(options_.poll_interval);
    }
    LogInfo(absl::StrCat("evaluator: stopping: ", runtime_->shutdown()->reason()));
    return runtime_->shutdown()->exit_code();
  }

 private:
  // Evaluates one committed checkpoint and reports it; true when it is the job's final
  // one. A checkpoint that cannot be read or evaluated is logged, counted and skipped.
  bool EvaluateOne(const std::string& path) {
    absl::StatusOr<std::unique_ptr<CheckpointReader>> checkpoint =
        CheckpointReader::Open(path, {/*load_sharded_tensors=*/false});
    absl::StatusOr<EvaluationResult> result =
        checkpoint.ok() ? EvaluateCheckpoint(**checkpoint, "validation")
                        : absl::StatusOr<EvaluationResult>(checkpoint.status());
    if (!result.ok()) {
      metrics_.failures.Increment();
      LogError(absl::StrCat("evaluator: checkpoint ", path, " skipped: ",
                            result.status().message()));
      return false;
    }
    const CheckpointReader& read = **checkpoint;
    const std::string line = absl::StrFormat(
        "evaluated %s (epoch %d, step %d): loss: %.4f - accuracy: %.4f - %d examples", path,
        read.epoch(), read.step(), result->loss, result->accuracy, result->samples);
    out_ << line << std::endl;
    LogInfo(line);
    metrics_.loss.Set(result->loss);
    metrics_.accuracy.Set(result->accuracy);
    metrics_.step.Set(static_cast<double>(read.step()));
    metrics_.evaluated.Increment();
    if (events_ != nullptr) {
      absl::Status written = events_->WriteScalars(
          read.step(), {{"evaluation_loss_vs_iterations", result->loss},
                        {"evaluation_accuracy_vs_iterations", result->accuracy}});
      if (!written.ok()) LogError(absl::StrCat("evaluator: ", written.message()));
    }
    const int64_t epochs = JobEpochs(read);
    return epochs > 0 && read.epoch() >= epochs;
  }

  const EvaluatorOptions options_;
  DaemonRuntime* const runtime_;  // Not owned.
  std::ostream& out_;
  const std::unique_ptr<EventFileWriter> events_;
  EvaluatorMetrics metrics_;
  int64_t last_step_ = -1;
};

}  // namespace

int RunEvaluatorTask(const EvaluatorOptions& options, DaemonRuntime* runtime, std::ostream& out) {
  if (options.checkpoint_dir.empty()) {
    LogError(
        "an evaluator task needs --checkpoint_dir: the folder the chief writes its checkpoints "
        "to (shared with it), whose every new checkpoint it evaluates");
    return kExitBadConfiguration;
  }
  std::unique_ptr<EventFileWriter> events;
  if (!options.logdir.empty()) {
    absl::StatusOr<std::unique_ptr<EventFileWriter>> created =
        EventFileWriter::Create(absl::StrCat(options.logdir, "/eval"));
    if (!created.ok()) {
      LogError(created.status().message());
      return kExitFailure;
    }
    events = *std::move(created);
  }
  const int code = EvaluatorLoop(options, runtime, out, std::move(events)).Run();
  if (code == kExitOk) runtime->metrics()->Linger();
  return code;
}

}  // namespace pstrain
