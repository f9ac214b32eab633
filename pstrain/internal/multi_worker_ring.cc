#include "pstrain/internal/multi_worker_ring.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/daemon/daemon_options.h"
#include "common/status_macros.h"

namespace pstrain::distribute::internal {

absl::StatusOr<GrpcRingOptions> RingFromTfConfig(const TfConfig& config) {
  GrpcRingOptions ring;
  int rank = -1;
  for (const char* job : {"chief", "worker"}) {
    const std::vector<std::string>& tasks = config.cluster.tasks(job);
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (config.task.type == job && config.task.index == static_cast<int>(i)) {
        rank = static_cast<int>(ring.addresses.size());
      }
      ring.addresses.push_back(tasks[i]);
      ring.names.push_back(absl::StrCat(job, " ", i));
    }
  }
  if (rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: multi_worker_mirrored runs on chief and worker tasks, not ",
                     TaskIdToString(config.task)));
  }
  ring.rank = rank;
  return ring;
}

absl::StatusOr<std::unique_ptr<MultiWorkerRing>> MultiWorkerRing::Start(const TfConfig& config) {
  std::unique_ptr<MultiWorkerRing> ring(new MultiWorkerRing());
  PS_ASSIGN_OR_RETURN(ring->options_, RingFromTfConfig(config));
  const int rank = ring->options_.rank;
  const int n = static_cast<int>(ring->options_.addresses.size());
  PS_ASSIGN_OR_RETURN(ring->listen_address_, ListenAddressFor(ring->options_.addresses[rank]));
  ring->service_ = std::make_unique<CollectiveService>(&ring->mailbox_, (rank + n - 1) % n);
  ServerOptions so;
  so.listen_address = ring->listen_address_;
  so.services = {ring->service_.get()};
  PS_ASSIGN_OR_RETURN(ring->server_, StartServer(so));
  PS_ASSIGN_OR_RETURN(ring->transport_, GrpcRingTransport::Create(ring->options_, &ring->mailbox_));
  return ring;
}

MultiWorkerRing::~MultiWorkerRing() {
  mailbox_.Close();
  if (server_.server != nullptr) {
    server_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
}

}  // namespace pstrain::distribute::internal
