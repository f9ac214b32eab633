#include "train/train_monitoring.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/tensorboard/tensorboard_flags.h"
#include "nlohmann/json.hpp"

namespace pstrain {

absl::StatusOr<std::unique_ptr<TrainMonitoring>> TrainMonitoring::Start(
    DaemonMetrics* metrics, const JobSpec& job, const std::string& title, int num_replicas,
    bool reports) {
  std::unique_ptr<TrainMonitoring> m(new TrainMonitoring());
  m->strategy_ = title;
  m->metrics_ = metrics;
  m->training_metrics_ = std::make_unique<TrainingMetrics>(m->metrics_->registry());
  m->observers_.Add(m->training_metrics_.get());
  m->dashboard_ = std::make_unique<Dashboard>(Dashboard::Options{title, [] {
    return nlohmann::json{{"phase", "training"}};
  }});
  m->observers_.Add(m->dashboard_.get());
  if (m->metrics_->server() != nullptr) {
    Dashboard* dashboard = m->dashboard_.get();
    m->metrics_->server()->SetPageHandler(
        [dashboard](const std::string& path, const std::string& query) {
          return dashboard->Handle(path, query);
        });
    LogInfo(absl::StrCat("dashboard on http://localhost:", m->metrics_->server()->port(), "/"));
  }
  if (reports) {
    const double learning_rate =
        job.optimizer.learning_rate() *
        (job.scale_learning_rate ? static_cast<double>(num_replicas) : 1.0);
    PS_ASSIGN_OR_RETURN(m->tensorboard_, TensorBoardObserverFromFlags(learning_rate));
    m->observers_.Add(m->tensorboard_.get());
    if (isatty(STDERR_FILENO) == 1) {
      m->progress_ = std::make_unique<TerminalProgress>(stderr);
      m->observers_.Add(m->progress_.get());
    }
  }
  return m;
}

TrainMonitoring::~TrainMonitoring() {
  // The HTTP server outlives this object (the runtime owns it): its threads must stop
  // calling the dashboard first.
  if (metrics_->server() != nullptr) metrics_->server()->SetPageHandler(nullptr);
}

void TrainMonitoring::OnBatch(const BatchProgress& p) {
  StepsDone done;
  done.epoch = p.epoch;
  done.epochs = p.epochs;
  done.global_step = p.global_step;
  done.epoch_step = p.step;
  done.epoch_steps = p.steps;
  done.steps = 1;
  done.samples = p.samples;
  done.loss = p.step_loss;
  done.epoch_loss = p.loss;
  done.epoch_accuracy = p.accuracy;
  done.epoch_elapsed = p.elapsed;
  observers_.OnSteps(done);
}

void TrainMonitoring::Finish() {
  if (progress_ != nullptr) progress_->Clear();
  metrics_->Linger();
}

}  // namespace pstrain
