#include "pstrain/internal/chief_task.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "ps_server/rpc/grpc_ps_client.h"

namespace pstrain::distribute::internal {
namespace {

// The custom loop's membership: its polls are not periodic, so a task is lost only when
// the scheduler loses it (no deadline); the scheduler logs the loss, this the return.
Membership::Options CustomLoopMembershipOptions() {
  Membership::Options options;
  options.jobs = {Role::kPs, Role::kWorker};
  options.on_change = [](const std::string& task, MemberState from, MemberState to) {
    if (from == MemberState::kLost && to == MemberState::kAlive) {
      LogInfo(absl::StrCat(task, " answers again"));
    }
  };
  return options;
}

}  // namespace

ChiefTask::ChiefTask(const StrategyOptions& options, TfConfig config)
    : options_(options),
      config_(std::move(config)),
      membership_(config_.cluster, CustomLoopMembershipOptions()) {}

absl::StatusOr<std::unique_ptr<ChiefTask>> ChiefTask::Start(
    const StrategyOptions& options, TfConfig config,
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  std::unique_ptr<ChiefTask> task(new ChiefTask(options, std::move(config)));
  const std::vector<std::string>& ps = task->config_.cluster.tasks(Role::kPs);
  for (size_t i = 0; i < ps.size(); ++i) {
    task->ps_.push_back(CreateGrpcPsClient(static_cast<int>(i), ps[i], options.rpc_timeout));
  }
  const std::vector<std::string>& workers = task->config_.cluster.tasks(Role::kWorker);
  for (size_t i = 0; i < workers.size(); ++i) {
    task->workers_.push_back(CreateGrpcFunctionWorkerClient(
        absl::StrCat("worker task ", i), workers[i], options.function_timeout,
        options.rpc_timeout));
  }
  // No service of its own: the tasks watch its health service.
  task->server_ = std::make_unique<TaskServer>(options, task->config_);
  PS_RETURN_IF_ERROR(task->server_->Start({}, std::move(credentials)));
  return task;
}

ChiefTask::~ChiefTask() {
  {
    absl::MutexLock lock(&mu_);
    scheduler_.reset();
  }
  if (leave_tasks_running_) {
    LogInfo("leaving the ps and worker tasks running for a restarted chief");
    return;
  }
  std::vector<std::function<absl::Status()>> stops;
  for (auto& worker : workers_) {
    stops.push_back([&worker] { return worker->Shutdown("the job is done"); });
  }
  if (absl::Status s = RunConcurrently(stops); !s.ok()) LogWarning(s.message());
  stops.clear();
  for (auto& ps : ps_) stops.push_back([&ps] { return ps->Shutdown("the job is done"); });
  if (absl::Status s = RunConcurrently(stops); !s.ok()) LogWarning(s.message());
}

absl::Status ChiefTask::Serve() {
  return absl::FailedPreconditionError("the chief does not serve: it runs the training loop");
}

std::vector<PsClient*> ChiefTask::ps_clients() const {
  std::vector<PsClient*> out;
  for (const auto& ps : ps_) out.push_back(ps.get());
  return out;
}

absl::Status ChiefTask::WaitForPs() {
  const absl::Time deadline = absl::Now() + options_.startup_timeout;
  std::vector<bool> up(ps_.size(), false);
  while (true) {
    std::vector<std::string> down;
    for (size_t p = 0; p < ps_.size(); ++p) {
      if (up[p]) continue;
      absl::StatusOr<PsStatusResponse> status = ps_[p]->GetStatus();
      up[p] = status.ok();
      if (status.ok()) {
        // p is the cluster spec's index, so the member exists.
        membership_.Heard({Role::kPs, static_cast<int>(p)}).IgnoreError();
      } else {
        down.push_back(std::string(status.status().message()));
      }
    }
    if (down.empty()) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::UnavailableError(absl::StrCat(
          "ps tasks did not answer within ", absl::FormatDuration(options_.startup_timeout),
          ": ", absl::StrJoin(down, "; ")));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

std::vector<FunctionWorkerClient*> ChiefTask::worker_clients() const {
  std::vector<FunctionWorkerClient*> workers;
  for (const auto& w : workers_) workers.push_back(w.get());
  return workers;
}

ClosureScheduler* ChiefTask::scheduler() {
  absl::MutexLock lock(&mu_);
  if (scheduler_ == nullptr) {
    std::vector<ScheduledWorker*> workers;
    for (size_t w = 0; w < workers_.size(); ++w) {
      watched_workers_.push_back(
          std::make_unique<WatchedWorker>(workers_[w].get(), &membership_, static_cast<int>(w)));
      workers.push_back(watched_workers_.back().get());
    }
    ClosureSchedulerOptions so;
    so.startup_timeout = options_.startup_timeout;
    so.recovery_timeout = options_.worker_recovery_timeout;
    // A function that failed on a ps: the strategy recovers the ps (census, recreate from
    // the newest checkpoint) with dispatch paused, and the function runs again.
    so.recover_ps = recover_ps_;
    so.on_worker_lost = ReportLostTo(&membership_);
    scheduler_ = std::make_unique<ClosureScheduler>(std::move(workers), so);
  }
  return scheduler_.get();
}

}  // namespace pstrain::distribute::internal
