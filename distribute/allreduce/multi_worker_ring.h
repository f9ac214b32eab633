#ifndef PSTRAIN_DISTRIBUTE_ALLREDUCE_MULTI_WORKER_RING_H_
#define PSTRAIN_DISTRIBUTE_ALLREDUCE_MULTI_WORKER_RING_H_

// The all-reduce ring of a multi_worker_mirrored job, from TF_CONFIG as TensorFlow orders
// it (the chief, if any, then the workers are the ranks): the mailbox, the collective
// service on this task's port, and the transport to the next rank. The one place the ring
// is read from TF_CONFIG, for `train` and for the library alike; who serves the collective
// is the caller's (the daemon's own server under `train`, a server of the ring's own in a
// library process).
//
// Thread-safety: built, closed and destroyed by one thread; the transport is used as
// distribute/allreduce/ring_transport.h says.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cluster_spec.h"
#include "common/rpc/grpc_util.h"
#include "grpcpp/grpcpp.h"
#include "distribute/allreduce/chunk_mailbox.h"
#include "distribute/allreduce/grpc_ring_transport.h"

namespace pstrain {

// The ring's ranks, addresses and names ("worker 1") from `config`, this task's rank set.
// Errors: INVALID_ARGUMENT this task is neither the chief nor a worker.
absl::StatusOr<GrpcRingOptions> RingFromTfConfig(const TfConfig& config);

class MultiWorkerRing {
 public:
  // Serves `service` (not owned; the ring outlives the serving) for this task, whose
  // TF_CONFIG address is `task_address`. Returns the server when it is the ring's own
  // (stopped when the ring is destroyed), or one with a null server and the port when
  // another's (the daemon's) serves it, which the caller stops after Close().
  using ServeCollective = std::function<absl::StatusOr<RunningServer>(
      grpc::Service* service, const std::string& task_address)>;

  // Makes the collective service, serves it with `serve` and connects to the next rank
  // lazily. Only the left neighbour's identity may send chunks (checked when authorization
  // is on). Errors: RingFromTfConfig's; serve's (UNAVAILABLE a port that cannot be bound).
  static absl::StatusOr<std::unique_ptr<MultiWorkerRing>> Start(const TfConfig& config,
                                                                const ServeCollective& serve);
  // Close()s and stops the ring's own server.
  ~MultiWorkerRing();

  // Closes the stream to the next rank (waiting up to a second for it to confirm it has
  // every chunk: GrpcRingTransport::Close) and the mailbox, so that the server serving it
  // can stop. Idempotent.
  void Close();

  RingTransport* transport() { return transport_.get(); }
  const GrpcRingOptions& options() const { return options_; }
  int rank() const { return options_.rank; }
  int num_ranks() const { return static_cast<int>(options_.addresses.size()); }
  // The port the collective is served on.
  int port() const { return server_.port; }

 private:
  MultiWorkerRing() = default;

  GrpcRingOptions options_;
  ChunkMailbox mailbox_;
  std::unique_ptr<CollectiveService> service_;
  RunningServer server_;  // server_.server is null when another's server serves
  std::unique_ptr<GrpcRingTransport> transport_;
};

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_ALLREDUCE_MULTI_WORKER_RING_H_
