#include "distribute/allreduce/multi_worker_ring.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace pstrain {

namespace {

// The ring's tasks in rank order: the chief, if any, then the workers.
std::vector<TaskId> RingTasks(const TfConfig& config) {
  std::vector<TaskId> tasks;
  for (Role role : {Role::kChief, Role::kWorker}) {
    for (int i = 0; i < config.cluster.num_tasks(role); ++i) tasks.push_back({role, i});
  }
  return tasks;
}

}  // namespace

absl::StatusOr<GrpcRingOptions> RingFromTfConfig(const TfConfig& config) {
  GrpcRingOptions ring;
  int rank = -1;
  for (const TaskId& task : RingTasks(config)) {
    if (config.task == task) rank = static_cast<int>(ring.addresses.size());
    ring.addresses.push_back(config.cluster.tasks(task.type)[task.index]);
    ring.names.push_back(absl::StrCat(RoleName(task.type), " ", task.index));
  }
  if (rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: multi_worker_mirrored runs on chief and worker tasks, not ",
                     config.task.type == Role::kAdmin ? std::string("a process without TF_CONFIG")
                                                      : TaskIdToString(config.task)));
  }
  ring.rank = rank;
  return ring;
}

absl::StatusOr<std::unique_ptr<MultiWorkerRing>> MultiWorkerRing::Start(
    const TfConfig& config, const ServeCollective& serve) {
  std::unique_ptr<MultiWorkerRing> ring(new MultiWorkerRing());
  PS_ASSIGN_OR_RETURN(ring->options_, RingFromTfConfig(config));
  const int rank = ring->options_.rank;
  const int n = static_cast<int>(ring->options_.addresses.size());
  // Only the left neighbour, as itself, sends chunks (checked when authorization is on).
  const int left = (rank + n - 1) % n;
  const TaskId sender = RingTasks(config)[left];
  ring->service_ =
      std::make_unique<CollectiveService>(&ring->mailbox_, left, std::string(RoleName(sender.type)),
                                          sender.index);
  PS_ASSIGN_OR_RETURN(ring->server_, serve(ring->service_.get(), ring->options_.addresses[rank]));
  PS_ASSIGN_OR_RETURN(ring->transport_, GrpcRingTransport::Create(ring->options_, &ring->mailbox_));
  return ring;
}

void MultiWorkerRing::Close() {
  // Our chunks first: the next rank's reply to the half-close says it filed every one, so
  // the process may exit; and its server then has no open stream from us to wait for.
  if (transport_ != nullptr) {
    if (absl::Status closed = transport_->Close(absl::Seconds(1)); !closed.ok()) {
      LogWarning(absl::StrCat("closing the all-reduce ring: ", closed.message()));
    }
  }
  mailbox_.Close();
}

MultiWorkerRing::~MultiWorkerRing() {
  Close();
  if (server_.server != nullptr) {
    server_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
}

}  // namespace pstrain
