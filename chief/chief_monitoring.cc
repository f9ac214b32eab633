#include "chief/chief_monitoring.h"

#include <unistd.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "common/tensorboard/tensorboard_flags.h"
#include "nlohmann/json.hpp"

namespace pstrain {

absl::StatusOr<std::unique_ptr<ChiefMonitoring>> ChiefMonitoring::Start(
    DaemonMetrics* metrics, const JobSpec& job, int num_workers, const Membership* membership,
    std::function<void(ChiefStatusResponse*)> describe) {
  std::unique_ptr<ChiefMonitoring> m(new ChiefMonitoring());
  m->membership_ = membership;
  m->describe_ = std::move(describe);
  m->metrics_ = metrics;
  m->training_metrics_ = std::make_unique<TrainingMetrics>(m->metrics_->registry());
  m->observers_.Add(m->training_metrics_.get());
  m->tasks_collector_ = m->metrics_->registry()->AddCollector(
      [membership](std::vector<prometheus::MetricFamily>* families) {
        std::map<std::string, int> registered;
        for (const distribute::MemberStatus& t : membership->Snapshot()) {
          registered[std::string(RoleName(t.task.type))] += t.registered ? 1 : 0;
        }
        MetricFamilyBuilder family("pstrain_chief_tasks_registered",
                                   "Tasks registered with the chief, by type",
                                   prometheus::MetricType::Gauge);
        for (const auto& [type, count] : registered) family.Add(count, {{"task_type", type}});
        family.AppendTo(families);
      });
  ChiefMonitoring* self = m.get();
  m->dashboard_ = std::make_unique<Dashboard>(Dashboard::Options{
      absl::StrCat("pstrain chief: parameter_server, ", num_workers, " workers"),
      [self] { return self->DashboardStatus(); }});
  m->observers_.Add(m->dashboard_.get());
  if (m->metrics_->server() != nullptr) {
    Dashboard* dashboard = m->dashboard_.get();
    m->metrics_->server()->SetPageHandler(
        [dashboard](const std::string& path, const std::string& query) {
          return dashboard->Handle(path, query);
        });
    LogInfo(absl::StrCat("dashboard on http://localhost:", m->metrics_->server()->port(), "/"));
  }
  const double learning_rate = job.optimizer.learning_rate() *
                               (job.scale_learning_rate ? static_cast<double>(num_workers) : 1.0);
  PS_ASSIGN_OR_RETURN(m->tensorboard_, TensorBoardObserverFromFlags(learning_rate));
  m->observers_.Add(m->tensorboard_.get());
  if (isatty(STDERR_FILENO) == 1) {
    m->progress_ = std::make_unique<TerminalProgress>(stderr);
    m->observers_.Add(m->progress_.get());
  }
  return m;
}

ChiefMonitoring::~ChiefMonitoring() {
  // The HTTP server outlives this object (the runtime owns it): its threads must stop
  // calling the collector and the dashboard first.
  if (metrics_->server() != nullptr) metrics_->server()->SetPageHandler(nullptr);
  metrics_->registry()->RemoveCollector(tasks_collector_);
}

void ChiefMonitoring::Finish() {
  if (progress_ != nullptr) progress_->Clear();
  metrics_->Linger();
}

nlohmann::json ChiefMonitoring::DashboardStatus() const {
  ChiefStatusResponse status;
  describe_(&status);
  nlohmann::json tasks = nlohmann::json::array();
  for (const distribute::MemberStatus& t : membership_->Snapshot()) {
    nlohmann::json task = {{"role", RoleName(t.task.type)},
                           {"index", t.task.index},
                           {"address", t.address}};
    // The membership's own rule (distribute/membership.h) says who is lost.
    switch (t.state) {
      case distribute::MemberState::kUnregistered:
        task["state"] = "waiting";
        break;
      case distribute::MemberState::kAlive:
        task["state"] = "up";
        break;
      case distribute::MemberState::kLost:
        task["state"] = "lost";
        break;
    }
    if (t.registered) task["last_heartbeat_ms"] = absl::ToInt64Milliseconds(t.since_heard);
    tasks.push_back(std::move(task));
  }
  nlohmann::json layout = nlohmann::json::array();
  for (const VariablePlacementEntry& e : status.placement()) {
    const int64_t first = e.row_offset();
    layout.push_back(
        {{"variable", e.variable_name().empty() ? e.name() : e.variable_name()},
         {"shard", e.name()},
         {"ps", e.ps_index()},
         {"rows", e.num_rows() > 0 ? absl::StrCat(first, "-", first + e.num_rows() - 1) : "-"},
         {"shape", ShapeToString(std::vector<int64_t>(e.shape().begin(), e.shape().end()))}});
  }
  return {{"phase", status.phase_name()},
          {"tasks", std::move(tasks)},
          {"layout", std::move(layout)}};
}

}  // namespace pstrain
