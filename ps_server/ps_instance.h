#ifndef PSTRAIN_PS_SERVER_PS_INSTANCE_H_
#define PSTRAIN_PS_SERVER_PS_INSTANCE_H_

// One parameter server, composed once: the variable store (variable_store.h), its metrics
// (ps_metrics.h), its part of sharded checkpoints when it has a checkpoint folder
// (checkpoint_shards.h) and the gRPC service over them (rpc/ps_service.h). The ps daemon
// (ps_task.cc) and a custom loop's ps (pstrain/internal/ps_task.cc) both run this one, each
// serving service() on its own server (the daemon's TaskRuntime with registration and
// heartbeats; the library's TaskServer with the custom loop's credentials), so the ps a
// custom loop starts is the daemon's ps. Its users name neither the store nor the service.
//
// Thread-safety: service() is served from gRPC's threads; the accessors may be read from
// any thread while it serves.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics/metrics_registry.h"
#include "grpcpp/grpcpp.h"

namespace pstrain {

class CheckpointShards;
class PsMetrics;
class PsServiceImpl;
class VariableStore;

class PsInstance {
 public:
  struct Options {
    // Runs when a Shutdown RPC arrives, with the chief's reason (required).
    std::function<void(const std::string&)> on_shutdown;
    // Where its pstrain_ps_* series go (not owned; required): the daemon's scraped
    // registry, or one of a custom loop's own, read by GetStatus and the final status.
    MetricsRegistry* registry = nullptr;
    // The job's number of workers: a push from worker-i with i >= num_workers is refused
    // (0: not known, not checked). Only the job's own workers take part in its pushes.
    int num_workers = 0;
    // Bytes the service may hold for requests in flight (PsServiceOptions); 0: a quarter
    // of the process's memory budget (--max_memory).
    int64_t request_memory_bytes = 0;
    // The job's checkpoint folder, shared with the chief: the ps writes and restores its
    // own shards there. Empty: none (the chief reads every shard and writes them itself).
    std::string checkpoint_dir;
    // Fault injection for tests: a pause after a shard file is written, before it is
    // synced and answered (CheckpointShards::Options::delay_before_sync).
    absl::Duration checkpoint_shard_delay = absl::ZeroDuration();
  };

  // An empty ps ready to serve: register service() on a server, which must stop before
  // this instance goes. Errors: INVALID_ARGUMENT no on_shutdown or registry, a negative
  // num_workers or request_memory_bytes; nothing is built then.
  static absl::StatusOr<std::unique_ptr<PsInstance>> Create(Options options);
  ~PsInstance();

  PsInstance(const PsInstance&) = delete;
  PsInstance& operator=(const PsInstance&) = delete;

  // The ParameterServer service to serve. Owned by this instance.
  grpc::Service* service();

  // Whether it writes and restores checkpoint shards (a checkpoint_dir was given).
  bool has_checkpoint_shards() const { return checkpoint_shards_ != nullptr; }

  // Pushes and pulls the store has applied and answered so far.
  int64_t num_pushes() const;
  int64_t num_pulls() const;

  // Logs the ps's final status as GetStatus reports it (variables, versions, traffic),
  // as task `task_index`: the last line of a ps that stops serving.
  void LogFinalStatus(int task_index) const;

 private:
  PsInstance();

  // In the order they are built: the service reaches all three.
  std::unique_ptr<VariableStore> store_;
  std::unique_ptr<PsMetrics> metrics_;
  std::unique_ptr<CheckpointShards> checkpoint_shards_;  // null without a checkpoint_dir
  std::unique_ptr<PsServiceImpl> service_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_PS_INSTANCE_H_
