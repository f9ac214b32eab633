#include "worker/allreduce/multi_worker_ring.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/daemon/daemon_options.h"
#include "common/status_macros.h"

namespace pstrain::distribute::internal {

namespace {

// The ring's tasks in rank order: the chief, if any, then the workers.
std::vector<TaskId> RingTasks(const TfConfig& config) {
  std::vector<TaskId> tasks;
  for (const char* job : {"chief", "worker"}) {
    for (int i = 0; i < config.cluster.num_tasks(job); ++i) tasks.push_back({job, i});
  }
  return tasks;
}

}  // namespace

absl::StatusOr<GrpcRingOptions> RingFromTfConfig(const TfConfig& config) {
  GrpcRingOptions ring;
  int rank = -1;
  for (const TaskId& task : RingTasks(config)) {
    if (config.task.type == task.type && config.task.index == task.index) {
      rank = static_cast<int>(ring.addresses.size());
    }
    ring.addresses.push_back(config.cluster.tasks(task.type)[task.index]);
    ring.names.push_back(absl::StrCat(task.type, " ", task.index));
  }
  if (rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: multi_worker_mirrored runs on chief and worker tasks, not ",
                     TaskIdToString(config.task)));
  }
  ring.rank = rank;
  return ring;
}

absl::StatusOr<std::unique_ptr<MultiWorkerRing>> MultiWorkerRing::Start(
    const TfConfig& config, std::shared_ptr<grpc::ServerCredentials> credentials) {
  std::unique_ptr<MultiWorkerRing> ring(new MultiWorkerRing());
  PS_ASSIGN_OR_RETURN(ring->options_, RingFromTfConfig(config));
  const int rank = ring->options_.rank;
  const int n = static_cast<int>(ring->options_.addresses.size());
  PS_ASSIGN_OR_RETURN(ring->listen_address_, ListenAddressFor(ring->options_.addresses[rank]));
  // Only the left neighbour, as itself, sends chunks (checked when authorization is on).
  const int left = (rank + n - 1) % n;
  const TaskId sender = RingTasks(config)[left];
  ring->service_ =
      std::make_unique<CollectiveService>(&ring->mailbox_, left, sender.type, sender.index);
  ServerOptions so;
  so.listen_address = ring->listen_address_;
  so.credentials = std::move(credentials);
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
