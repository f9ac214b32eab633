#ifndef PSTRAIN_WORKER_ALLREDUCE_MULTI_WORKER_RING_H_
#define PSTRAIN_WORKER_ALLREDUCE_MULTI_WORKER_RING_H_

// The all-reduce ring of a multi_worker_mirrored job, from TF_CONFIG as TensorFlow orders
// it (the chief, if any, then the workers are the ranks): the mailbox, the collective
// service serving it on this task's port, and the transport to the next rank.
//
// Thread-safety: built and destroyed by one thread; the transport is used as
// worker/allreduce/ring_transport.h says.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cluster_spec.h"
#include "common/rpc/grpc_util.h"
#include "grpcpp/grpcpp.h"
#include "worker/allreduce/chunk_mailbox.h"
#include "worker/allreduce/grpc_ring_transport.h"

namespace pstrain::distribute::internal {

// The ring's ranks, addresses and names ("worker 1") from `config`, this task's rank set.
// Errors: INVALID_ARGUMENT this task is neither the chief nor a worker.
absl::StatusOr<GrpcRingOptions> RingFromTfConfig(const TfConfig& config);

class MultiWorkerRing {
 public:
  // Serves the collective on this task's port (every interface) with `credentials`
  // (task_security.h's SecureTask; null: plaintext, no authorization) and connects to the
  // next rank lazily. With authorization, only the left neighbour's identity may send
  // chunks. Errors: RingFromTfConfig's; INVALID_ARGUMENT an address without a port;
  // UNAVAILABLE the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<MultiWorkerRing>> Start(
      const TfConfig& config, std::shared_ptr<grpc::ServerCredentials> credentials);
  // Closes the mailbox and stops serving.
  ~MultiWorkerRing();

  RingTransport* transport() { return transport_.get(); }
  const GrpcRingOptions& options() const { return options_; }
  const std::string& listen_address() const { return listen_address_; }

 private:
  MultiWorkerRing() = default;

  GrpcRingOptions options_;
  std::string listen_address_;
  ChunkMailbox mailbox_;
  std::unique_ptr<CollectiveService> service_;
  RunningServer server_;
  std::unique_ptr<GrpcRingTransport> transport_;
};

}  // namespace pstrain::distribute::internal

#endif  // PSTRAIN_WORKER_ALLREDUCE_MULTI_WORKER_RING_H_
