#include "pstrain/internal/parameter_server_cluster.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/daemon/daemon_options.h"
#include "common/logging.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "ps_server/rpc/ps_service.h"
#include "pstrain/internal/function_worker_service.h"
#include "pstrain/internal/task_security.h"

namespace pstrain::distribute::internal {
namespace {

// How often a ps or worker asks after the chief.
constexpr absl::Duration kChiefCheckInterval = absl::Seconds(1);

// The custom loop's membership: its polls are not periodic, so a task is lost only when
// the scheduler loses it (no deadline); the scheduler logs the loss, this the return.
Membership::Options CustomLoopMembershipOptions() {
  Membership::Options options;
  options.jobs = {"ps", "worker"};
  options.on_change = [](const std::string& task, MemberState from, MemberState to) {
    if (from == MemberState::kLost && to == MemberState::kAlive) {
      LogInfo(absl::StrCat(task, " answers again"));
    }
  };
  return options;
}

}  // namespace

ParameterServerCluster::ParameterServerCluster(const StrategyOptions& options, TfConfig config)
    : options_(options),
      config_(std::move(config)),
      membership_(config_.cluster, CustomLoopMembershipOptions()) {}

uint64_t PlacementFingerprint(const std::vector<VariablePlacementEntry>& placement) {
  // FNV-1a over every entry's bytes: the same entries give the same number everywhere.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const VariablePlacementEntry& entry : placement) {
    for (unsigned char c : entry.SerializeAsString()) {
      h ^= c;
      h *= 0x100000001b3ULL;
    }
    h ^= 0xff;
    h *= 0x100000001b3ULL;
  }
  return placement.empty() ? 0 : h;
}

absl::StatusOr<std::unique_ptr<ParameterServerCluster>> ParameterServerCluster::Start(
    const StrategyOptions& options, TfConfig config) {
  for (const char* job : {"chief", "ps", "worker"}) {
    if (config.cluster.num_tasks(job) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TF_CONFIG: parameter_server needs a chief, at least one ps and one worker; the "
          "cluster has no ", job));
    }
  }
  const Role role = config.task.type;
  if (role != Role::kChief && role != Role::kPs && role != Role::kWorker) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TF_CONFIG: parameter_server runs on chief, ps and worker tasks, not ",
        TaskIdToString(config.task)));
  }
  SetLogTag(absl::StrCat(RoleName(config.task.type), config.task.index));
  // The job's token or certificates before any channel is made: the ps and worker clients
  // below send them, and this task's server checks them.
  PS_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                      SecureTask(options, config));
  std::unique_ptr<ParameterServerCluster> cluster(
      new ParameterServerCluster(options, std::move(config)));
  cluster->credentials_ = std::move(credentials);
  const TfConfig& c = cluster->config_;
  if (role != Role::kPs) {
    const std::vector<std::string>& ps = c.cluster.tasks("ps");
    for (size_t i = 0; i < ps.size(); ++i) {
      cluster->ps_.push_back(CreateGrpcPsClient(static_cast<int>(i), ps[i], options.rpc_timeout));
    }
  }
  if (role == Role::kChief) {
    const std::vector<std::string>& workers = c.cluster.tasks("worker");
    for (size_t i = 0; i < workers.size(); ++i) {
      cluster->workers_.push_back(CreateGrpcFunctionWorkerClient(
          absl::StrCat("worker task ", i), workers[i], options.function_timeout,
          options.rpc_timeout));
    }
  }
  PS_RETURN_IF_ERROR(cluster->StartTaskServer());
  return cluster;
}

absl::Status ParameterServerCluster::StartTaskServer() {
  PS_ASSIGN_OR_RETURN(const std::string address, config_.cluster.address(config_.task));
  ServerOptions so;
  PS_ASSIGN_OR_RETURN(so.listen_address, ListenAddressFor(address));
  so.credentials = credentials_;
  auto on_shutdown = [this](const std::string& reason) {
    if (shutdown_.HasBeenNotified()) return;
    LogInfo(absl::StrCat("Shutdown RPC: ", reason));
    shutdown_.Notify();
  };
  if (role() == Role::kPs) {
    PsServiceOptions options;
    options.num_workers = config_.cluster.num_tasks("worker");
    service_ = std::make_unique<PsServiceImpl>(&store_, on_shutdown, options);
  } else if (role() == Role::kWorker) {
    service_ = std::make_unique<FunctionWorkerService>(&runner_, on_shutdown);
  }
  if (service_ != nullptr) so.services = {service_.get()};
  PS_ASSIGN_OR_RETURN(server_, StartServer(so));
  LogInfo(absl::StrCat("parameter_server ", TaskIdToString(config_.task), ": serving on ",
                       so.listen_address));
  return absl::OkStatus();
}

ParameterServerCluster::~ParameterServerCluster() {
  {
    absl::MutexLock lock(&mu_);
    scheduler_.reset();
  }
  if (role() == Role::kChief && leave_tasks_running_) {
    LogInfo("leaving the ps and worker tasks running for a restarted chief");
  } else if (role() == Role::kChief) {
    std::vector<std::function<absl::Status()>> stops;
    for (auto& worker : workers_) {
      stops.push_back([&worker] { return worker->Shutdown("the job is done"); });
    }
    if (absl::Status s = RunConcurrently(stops); !s.ok()) LogWarning(s.message());
    stops.clear();
    for (auto& ps : ps_) stops.push_back([&ps] { return ps->Shutdown("the job is done"); });
    if (absl::Status s = RunConcurrently(stops); !s.ok()) LogWarning(s.message());
  }
  if (server_.server != nullptr) {
    server_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
}

std::vector<PsClient*> ParameterServerCluster::ps_clients() const {
  std::vector<PsClient*> out;
  for (const auto& ps : ps_) out.push_back(ps.get());
  return out;
}

absl::Status ParameterServerCluster::WaitForPs() {
  const absl::Time deadline = absl::Now() + options_.startup_timeout;
  std::vector<bool> up(ps_.size(), false);
  while (true) {
    std::vector<std::string> down;
    for (size_t p = 0; p < ps_.size(); ++p) {
      if (up[p]) continue;
      absl::StatusOr<PsStatusResponse> status = ps_[p]->GetStatus();
      up[p] = status.ok();
      if (status.ok()) {
        membership_.Heard("ps", static_cast<int>(p)).IgnoreError();  // p is the spec's
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

std::vector<FunctionWorkerClient*> ParameterServerCluster::worker_clients() const {
  std::vector<FunctionWorkerClient*> workers;
  for (const auto& w : workers_) workers.push_back(w.get());
  return workers;
}

ClosureScheduler* ParameterServerCluster::scheduler() {
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

std::string ParameterServerCluster::ChiefName() const {
  return absl::StrCat("the chief (", config_.cluster.tasks("chief")[0], ")");
}

absl::Status ParameterServerCluster::CheckChief() {
  if (chief_health_ == nullptr) {
    chief_health_ =
        grpc::health::v1::Health::NewStub(CreateChannel(config_.cluster.tasks("chief")[0]));
  }
  grpc::ClientContext context;
  SetTimeout(&context, kChiefCheckInterval);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = chief_health_->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status, ChiefName());
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError(absl::StrCat(ChiefName(), " is not serving"));
  }
  return absl::OkStatus();
}

absl::Status ParameterServerCluster::Serve() {
  if (role() == Role::kChief) {
    return absl::FailedPreconditionError("the chief does not serve: it runs the training loop");
  }
  runner_.SetReady(true);
  const absl::Time start = absl::Now();
  absl::Time last_seen = start;
  bool seen = false;
  absl::Status last_error;
  while (!shutdown_.WaitForNotificationWithTimeout(kChiefCheckInterval)) {
    absl::Status chief = CheckChief();
    if (chief.ok()) {
      last_seen = absl::Now();
      seen = true;
      continue;
    }
    last_error = chief;
    const absl::Duration limit =
        seen ? options_.chief_timeout : std::max(options_.startup_timeout, options_.chief_timeout);
    if (absl::Now() - last_seen > limit) {
      runner_.SetReady(false);
      return absl::UnavailableError(
          absl::StrCat(ChiefName(), " has not answered for ", absl::FormatDuration(limit),
                       " (", last_error.message(), "); leaving"));
    }
  }
  runner_.SetReady(false);
  return absl::OkStatus();
}

}  // namespace pstrain::distribute::internal
