#ifndef PSTRAIN_DISTRIBUTE_CREATE_SYNC_STRATEGY_H_
#define PSTRAIN_DISTRIBUTE_CREATE_SYNC_STRATEGY_H_

// The one place a synchronous strategy (default, mirrored, multi_worker_mirrored) is made
// from its typed kind, with what it needs: the replicas' devices and replica 0's backend,
// and for multi_worker_mirrored the ring from TF_CONFIG (distribute/allreduce/
// multi_worker_ring.h) and the collective the workers agree on (the gRPC ring or NCCL).
// `train` (train/train_task.cc) and the library's CreateStrategy
// (pstrain/internal/sync_strategy.cc) both call it; each says the strategy in its own
// words (train's stdout line, the library's log).
//
// Thread-safety: called by one thread; the result is used as distribute/strategy.h says.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cluster_spec.h"
#include "common/math/backend.h"
#include "common/training/strategy_kind.h"
#include "distribute/allreduce/collective_selection.h"
#include "distribute/allreduce/multi_worker_ring.h"
#include "distribute/multi_worker_mirrored_strategy.h"
#include "distribute/strategy.h"

namespace pstrain {

struct SyncStrategyOptions {
  StrategyKind kind = StrategyKind::kDefault;
  // default and multi_worker_mirrored: CreateBackend's device (cpu, auto, cuda[:N]).
  std::string device = "cpu";
  // mirrored: the replicas' devices, "cpu:0,cpu:1" or "cuda:0,cuda:1" (empty: every GPU,
  // else one CPU replica).
  std::string devices;

  // multi_worker_mirrored only:
  TfConfig config;  // the cluster and this task
  CollectiveKind collective = CollectiveKind::kAuto;
  MultiWorkerMirroredOptions multi_worker;  // ring.timeout also bounds NCCL's calls
  // Serves the ring's collective service on this task's port.
  MultiWorkerRing::ServeCollective serve;
};

// What CreateSyncStrategy made. Members are destroyed in reverse order: the strategy
// before the ring it sends through.
struct SyncStrategySetup {
  std::unique_ptr<MultiWorkerRing> ring;  // multi_worker_mirrored
  std::unique_ptr<Strategy> strategy;
  // mirrored: the replicas' devices as given ("cpu:0", "cuda:1"); else empty.
  std::vector<std::string> devices;

  // The backend of local replica `replica` of the next model: replica 0 takes the one
  // made at creation (a CUDA context is costly to create twice, and a bad device failed
  // then), the others a new one on their device. Errors: CreateBackend's, naming the
  // device.
  absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(int replica);

  std::string device;                         // CreateBackend's device for all but mirrored
  std::vector<std::string> replica_devices;   // mirrored: CreateBackend's device per replica
  std::unique_ptr<Backend> first_backend;     // replica 0's, until MakeBackend(0) takes it
};

// Fills `out` step by step (so that a caller whose server already serves the ring keeps
// it alive when a later step fails). The multi_worker_mirrored ring and collective are
// said in two log lines.
// Errors: INVALID_ARGUMENT kind parameter_server (not a synchronous strategy), bad
// devices or device (named), a TF_CONFIG task that is not a chief or a worker, a
// malformed address; serve's (UNAVAILABLE a port that cannot be bound); CreateBackend's;
// FAILED_PRECONDITION the collective asked for is not possible; the ring's errors while
// the workers agree on the collective.
absl::Status CreateSyncStrategy(const SyncStrategyOptions& options, SyncStrategySetup* out);

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_CREATE_SYNC_STRATEGY_H_
