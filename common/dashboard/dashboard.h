#ifndef PSTRAIN_COMMON_DASHBOARD_DASHBOARD_H_
#define PSTRAIN_COMMON_DASHBOARD_DASHBOARD_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/metrics_server.h"
#include "common/training/training_observer.h"
#include "nlohmann/json.hpp"

namespace pstrain {

// The live dashboard the chief and train serve at `/` on their metrics port: charts of
// training and validation loss and accuracy per epoch, loss and samples per second per
// step (with its moving average), the task table, the variable layout and the checkpoints
// written. The page (dashboard_page.html, with the chart rules of chart_rules.js inlined
// into dashboard_page.h at build time) needs nothing from the internet: its script and
// styles are inline and it draws its charts on <canvas>; it polls /api/dashboard every
// two seconds.
//
// The run's history comes from the events it observes; what only the caller knows (the
// phase, the tasks, the layout) from Options::status at each request. Thread-safe.
class Dashboard : public TrainingObserver {
 public:
  struct Options {
    std::string title;  // e.g. "pstrain chief: parameter_server, 2 ps, 2 workers"
    // The current {"phase", "tasks": [{"role","index","address","state",
    // "last_heartbeat_ms"}], "layout": [{"variable","shard","ps","rows","shape"}]};
    // called on the HTTP server's threads; may be null.
    std::function<nlohmann::json()> status;
  };

  explicit Dashboard(Options options);

  void OnSteps(const StepsDone& steps) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnEpoch(const EpochSummary& summary) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnCheckpoint(const CheckpointEvent& checkpoint) override ABSL_LOCKS_EXCLUDED(mu_);

  // The page at "/" and its data at "/api/dashboard"; nullopt for other paths. Suits
  // MetricsServer::SetPageHandler.
  std::optional<HttpPage> Handle(const std::string& path, const std::string& query) const;

  // What /api/dashboard answers: {"title","epochs":[{"epoch","loss","accuracy",
  // "val_loss","val_accuracy","steps","samples","seconds"}],"steps":[[global_step, loss,
  // samples_per_second, window_seconds]],"checkpoints":[...],"status":{...},"workers":{...},
  // "progress":{"epoch","epoch_step","epoch_steps","elapsed_seconds","loss","accuracy"}}.
  nlohmann::json Data() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const Options options_;
  mutable absl::Mutex mu_;
  std::vector<nlohmann::json> epochs_ ABSL_GUARDED_BY(mu_);
  // [global step, loss, samples per second, the seconds that rate was measured over (the
  // page weights its moving average by them)], one point per 250 ms of reports at most;
  // halved (every other point dropped) when it reaches kMaxStepPoints.
  std::vector<std::vector<double>> step_points_ ABSL_GUARDED_BY(mu_);
  std::vector<nlohmann::json> checkpoints_ ABSL_GUARDED_BY(mu_);
  // Steps each worker ran (the chief's reports name the worker).
  std::map<int, int64_t> worker_steps_ ABSL_GUARDED_BY(mu_);
  // The furthest point of the epoch in progress, for a progress bar drawn elsewhere (the
  // launcher draws one from it on its terminal).
  nlohmann::json progress_ ABSL_GUARDED_BY(mu_) = nlohmann::json::object();
  int epoch_ ABSL_GUARDED_BY(mu_) = 0;
  int epochs_total_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t global_step_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_point_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t samples_since_point_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DASHBOARD_DASHBOARD_H_
