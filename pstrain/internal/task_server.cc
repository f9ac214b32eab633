#include "pstrain/internal/task_server.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/daemon/daemon_options.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace pstrain::distribute::internal {
namespace {

// How often a ps or worker asks after the chief.
constexpr absl::Duration kChiefCheckInterval = absl::Seconds(1);

}  // namespace

TaskServer::TaskServer(const StrategyOptions& options, const TfConfig& config)
    : options_(options), config_(config) {}

TaskServer::~TaskServer() {
  if (server_.server != nullptr) {
    server_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
}

std::function<void(const std::string&)> TaskServer::shutdown_callback() {
  return [this](const std::string& reason) {
    if (shutdown_.HasBeenNotified()) return;
    LogInfo(absl::StrCat("Shutdown RPC: ", reason));
    shutdown_.Notify();
  };
}

absl::Status TaskServer::Start(std::vector<grpc::Service*> services,
                               std::shared_ptr<grpc::ServerCredentials> credentials) {
  PS_ASSIGN_OR_RETURN(const std::string address, config_.cluster.address(config_.task));
  ServerOptions so;
  PS_ASSIGN_OR_RETURN(so.listen_address, ListenAddressFor(address));
  so.credentials = std::move(credentials);
  so.services = std::move(services);
  PS_ASSIGN_OR_RETURN(server_, StartServer(so));
  LogInfo(absl::StrCat("parameter_server ", TaskIdToString(config_.task), ": serving on ",
                       so.listen_address));
  return absl::OkStatus();
}

std::string TaskServer::ChiefName() const {
  return absl::StrCat("the chief (", config_.cluster.tasks(Role::kChief)[0], ")");
}

absl::Status TaskServer::CheckChief() {
  if (chief_health_ == nullptr) {
    chief_health_ = grpc::health::v1::Health::NewStub(
        CreateChannel(config_.cluster.tasks(Role::kChief)[0]));
  }
  grpc::ClientContext context;
  SetTimeout(&context, kChiefCheckInterval);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status =
      chief_health_->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status, ChiefName());
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError(absl::StrCat(ChiefName(), " is not serving"));
  }
  return absl::OkStatus();
}

absl::Status TaskServer::WaitForChief() {
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
      return absl::UnavailableError(
          absl::StrCat(ChiefName(), " has not answered for ", absl::FormatDuration(limit), " (",
                       last_error.message(), "); leaving"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain::distribute::internal
