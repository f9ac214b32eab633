#ifndef PSTRAIN_PSTRAIN_STRATEGY_H_
#define PSTRAIN_PSTRAIN_STRATEGY_H_

// tf.distribute.Strategy for a training loop of one's own (pstrain/pstrain.h shows one):
// which strategy, how many replicas step together, Run(step_fn) on each replica's slice of
// a global batch with per-replica values back, Reduce() of those values, and the models
// and distributed datasets made in its scope.
//
// Thread-safety: a Strategy is driven by one thread (the training loop, or on a
// parameter_server worker the thread that runs scheduled functions). Run() calls the step
// function from several threads at once under mirrored (one per replica), so a step
// function touches only its own replica's state.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cluster_spec.h"
#include "common/data/dataset.h"
#include "common/training/strategy_kind.h"
#include "pstrain/distributed_model.h"
#include "pstrain/replica.h"
#include "pstrain/value_codec.h"

namespace pstrain::distribute {

// The strategy's kind, as users name it; ParseStrategyKind reads a flag's value.
using ::pstrain::ParseStrategyKind;
using ::pstrain::StrategyKind;
using ::pstrain::StrategyKindName;
// A task's role in the cluster (strategy->task().type), and its TF_CONFIG name.
using ::pstrain::Role;
using ::pstrain::RoleName;
using ::pstrain::TaskId;

namespace internal {
class RoleTask;
template <typename R>
struct StatusOrValue;
template <typename T>
struct StatusOrValue<absl::StatusOr<T>> {
  using type = T;
};
}  // namespace internal

struct StrategyOptions {
  // Which strategy (a flag's value: ParseStrategyKind).
  StrategyKind strategy = StrategyKind::kDefault;
  // TF_CONFIG text; empty: the TF_CONFIG environment variable. multi_worker_mirrored and
  // parameter_server read the cluster and this task from it.
  std::string tf_config;
  // mirrored: the replicas' devices, "cpu:0,cpu:1" or "cuda:0,cuda:1" (default: every
  // GPU, else one CPU replica).
  std::string devices;
  // The other strategies: cpu, auto (CUDA when a device answers, else the CPU), cuda[:N].
  std::string device = "cpu";
  // The deadline of every RPC but a scheduled function and a collective.
  absl::Duration rpc_timeout = absl::Seconds(30);
  // How long the tasks wait for each other at start (the first collective of
  // multi_worker_mirrored; the ps tasks and workers for the parameter_server chief).
  absl::Duration startup_timeout = absl::Seconds(60);
  // multi_worker_mirrored: a worker that does not answer an all-reduce within this is
  // named and the step fails.
  absl::Duration collective_timeout = absl::Seconds(60);
  // multi_worker_mirrored: "auto" (NCCL when every worker runs on a CUDA device of a CUDA
  // build, else the gRPC ring), "ring" or "nccl" (an error when NCCL is not possible).
  std::string collective = "auto";
  // parameter_server: one scheduled function's deadline; a worker that misses it is lost
  // and the function runs again elsewhere.
  absl::Duration function_timeout = absl::Minutes(2);
  // parameter_server ps and worker tasks: exit (Join/Serve return UNAVAILABLE naming the
  // chief) when the chief has not answered for this long.
  absl::Duration chief_timeout = absl::Seconds(30);
  // parameter_server chief: how long scheduled functions wait for a lost worker to come
  // back when no worker is left, before Join fails naming them.
  absl::Duration worker_recovery_timeout = absl::Seconds(60);
  // parameter_server chief: how long training waits for a failed ps to answer again
  // (restarted by an orchestrator) before the job fails naming it, as the chief daemon's
  // --ps_recovery_timeout.
  absl::Duration ps_recovery_timeout = absl::Seconds(120);

  // multi_worker_mirrored and parameter_server: who may call this task's servers and what
  // its channels send, as for the daemons (README "Security",
  // common/daemon/daemon_security.h). Authorization is on: every task of the job needs the
  // same token (auth_token_file, else the PSTRAIN_AUTH_TOKEN environment variable) or
  // certificates (tls_dir with ca.crt and TASK.crt/.key, e.g. worker-1.crt, as
  // tools/make_certs.sh writes them; or tls_ca, tls_cert and tls_key), or `insecure`;
  // else the strategy is not made (INVALID_ARGUMENT saying what to give). A field left
  // empty (false) takes the program's command-line flag of the same name
  // (--auth_token_file, --tls_dir, --tls_ca, --tls_cert, --tls_key, --insecure; pstrain
  // defines them).
  std::string auth_token_file;
  std::string tls_dir;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  bool insecure = false;
};

// Where a training loop stands, as its checkpoints record it (the chief daemon's record
// the same two figures): Strategy::Save writes it, Strategy::Restore gives it back.
struct TrainingProgress {
  int epochs_done = 0;      // epochs completed
  int64_t global_step = 0;  // steps taken in all (under parameter_server: functions run)
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  // The kind CreateStrategy was asked for.
  virtual StrategyKind kind() const = 0;
  // "default", "mirrored", "multi_worker_mirrored", "parameter_server".
  virtual std::string name() const = 0;
  // Replicas that take one step together (parameter_server: those of one worker, 1).
  virtual int num_replicas_in_sync() const = 0;
  // This process's task in TF_CONFIG (its type Role::kChief, kWorker or kPs); type
  // Role::kAdmin (no task) without a cluster.
  virtual const TaskId& task() const = 0;
  // Whether this process reports for the job (prints the epoch lines, evaluates): the one
  // process of default and mirrored, rank 0 of multi_worker_mirrored (the chief if there
  // is one), the parameter_server chief.
  virtual bool is_chief() const = 0;

  // A model in this strategy's scope (see pstrain/distributed_model.h). On the
  // parameter_server chief this creates the variables on the ps tasks (waiting up to
  // startup_timeout for them); every task of a job creates the same models in the same
  // order. The strategy must outlive its models.
  // Errors: INVALID_ARGUMENT a model, loss or optimizer that does not parse (named);
  // parameter_server: a second model, a ps that cannot be reached (named); the backend's.
  virtual absl::StatusOr<std::unique_ptr<DistributedModel>> CreateModel(
      const ModelOptions& options) = 0;

  // strategy.experimental_distribute_dataset(dataset): global batches of
  // options.global_batch_size rows, each split across the replicas; in a multi-worker job
  // every process makes the same global batches (same data and seed) and keeps its
  // replicas' slices. Errors: as DistributedDataset::Create.
  absl::StatusOr<std::unique_ptr<DistributedDataset>> ExperimentalDistributeDataset(
      std::shared_ptr<const Dataset> data, const DistributedDatasetOptions& options) const;

  // strategy.run(fn, args=(batch,)): calls fn(ReplicaContext, ReplicaBatch) -> StatusOr<T>
  // once for each of this process's replicas, with its slice of `batch`, and returns
  // their values. Under mirrored the replicas run at once, one thread each. Gradients
  // handed to DistributedModel::ApplyGradients by the replicas are applied before Run
  // returns (synchronous strategies). Every replica runs, also when an earlier one
  // failed; the first error in replica order is returned and no update is applied.
  // Errors: INVALID_ARGUMENT a batch split for other replicas; FAILED_PRECONDITION on the
  // parameter_server chief (run steps through ClusterCoordinator::Schedule); fn's; the
  // update's (see DistributedModel::ApplyGradients).
  template <typename Fn>
  auto Run(Fn&& fn, const DistributedBatch& batch) -> absl::StatusOr<PerReplica<
      typename internal::StatusOrValue<std::invoke_result_t<
          Fn&, const ReplicaContext&, const ReplicaBatch&>>::type>> {
    using T = typename internal::StatusOrValue<
        std::invoke_result_t<Fn&, const ReplicaContext&, const ReplicaBatch&>>::type;
    std::vector<std::optional<T>> slots(batch.replicas.size());
    absl::Status status = RunReplicas(
        [&](const ReplicaContext& ctx) -> absl::Status {
          absl::StatusOr<T> value = fn(ctx, batch.replicas[ctx.local_index]);
          if (!value.ok()) return value.status();
          slots[ctx.local_index].emplace(*std::move(value));
          return absl::OkStatus();
        },
        batch);
    if (!status.ok()) return status;
    PerReplica<T> out;
    out.first_replica = batch.first_replica;
    for (std::optional<T>& v : slots) out.values.push_back(*std::move(v));
    return out;
  }

  // strategy.reduce(op, per_replica, axis=None): the element-wise sum (or mean, divided by
  // num_replicas_in_sync) of the values over every replica in sync, this process's and,
  // multi_worker_mirrored, every other worker's (an all-reduce: every worker calls it at
  // the same point). Local values are added in replica order, so the result is
  // deterministic. T needs a ValueCodec (pstrain/value_codec.h).
  // Errors: INVALID_ARGUMENT no values, or values of different sizes; the all-reduce's
  // (a worker that did not answer, named).
  template <typename T>
  absl::StatusOr<T> Reduce(ReduceOp op, const PerReplica<T>& per_replica) {
    std::vector<double> sum;
    for (size_t i = 0; i < per_replica.values.size(); ++i) {
      std::vector<double> flat;
      ValueCodec<T>::Flatten(per_replica.values[i], &flat);
      if (i == 0) {
        sum = std::move(flat);
        continue;
      }
      if (flat.size() != sum.size()) return ReduceSizeError(i, flat.size(), sum.size());
      for (size_t k = 0; k < sum.size(); ++k) sum[k] += flat[k];
    }
    if (per_replica.values.empty()) return ReduceSizeError(0, 0, 0);
    if (absl::Status s = SumAcrossWorkers(&sum); !s.ok()) return s;
    if (op == ReduceOp::kMean) {
      for (double& v : sum) v /= num_replicas_in_sync();
    }
    return ValueCodec<T>::Unflatten(sum);
  }

  // A ps task's whole job (TensorFlow: server.join()): serves the variables until the
  // chief says the job is done. Returns OK then; UNAVAILABLE naming the chief when it
  // has not answered for chief_timeout. Errors: FAILED_PRECONDITION on any other task.
  virtual absl::Status JoinServer();

  // The parameter_server strategy's task (its role's class), for ClusterCoordinator; null
  // otherwise.
  virtual internal::RoleTask* parameter_server_task() { return nullptr; }

  // Checkpoints of the model's state, tf.train.CheckpointManager's save() and a restore
  // of its latest_checkpoint: the values, optimizer slots and update counts of the
  // strategy's model and `progress`, in the one layout every pstrain trainer writes
  // (common/training/training_state.h), checksummed and written atomically (temp, fsync,
  // rename) into a folder of its own under `dir`, the newest 3 kept; so the chief
  // daemon (`chief --checkpoint_dir`), tools/evaluate and tools/export_safetensors read
  // them, and Restore reads the daemons'. parameter_server: on the chief, read from (and
  // restored onto) the ps tasks, sliced for the current placement; a ps that failed is
  // recovered first (ps recovery: ps_server/client/ps_recovery.h). The other strategies
  // answer UNIMPLEMENTED (their loop's checkpoints are Fit's: `train --checkpoint_dir`).
  // Save returns the checkpoint's path.
  // Errors: FAILED_PRECONDITION on a task other than the parameter_server chief, or
  //         before CreateModel; the ps's errors (named); INTERNAL a failed write (naming
  //         the path).
  virtual absl::StatusOr<std::string> Save(const std::string& dir,
                                           const TrainingProgress& progress);
  // Replaces the model's state with the newest good checkpoint's in `dir` (a corrupt
  // newest one is reported and skipped) and returns its progress. From then on a ps that
  // comes back empty is restored from the newest checkpoint in `dir`.
  // Errors: NOT_FOUND `dir` holds no checkpoint; INVALID_ARGUMENT it does not fit the
  //         model; DATA_LOSS a malformed one; as Save.
  virtual absl::StatusOr<TrainingProgress> Restore(const std::string& dir);
  // parameter_server chief: when the strategy is destroyed, leave the ps and worker
  // tasks running (their variables kept) for a chief restarted from a checkpoint, as the
  // chief daemon does when it is preempted; by default they are told the job is done.
  // Nothing on the other strategies and tasks.
  virtual void LeaveTasksRunning() {}

 protected:
  // Replicas this process runs: [first_local_replica(), + num_local_replicas()).
  virtual int first_local_replica() const = 0;
  virtual int num_local_replicas() const = 0;
  // Calls fn once per local replica with its context, then takes the updates the
  // replicas applied. See Run.
  virtual absl::Status RunReplicas(const std::function<absl::Status(const ReplicaContext&)>& fn,
                                   const DistributedBatch& batch) = 0;
  // Adds every other worker process's `values` into this one's (same length, same order
  // everywhere). One process: nothing to add.
  virtual absl::Status SumAcrossWorkers(std::vector<double>* values) = 0;
  // Checks that `batch` was split for this process's replicas.
  absl::Status CheckBatch(const DistributedBatch& batch) const;

 private:
  static absl::Status ReduceSizeError(size_t replica, size_t got, size_t want);
};

}  // namespace pstrain::distribute

#endif  // PSTRAIN_PSTRAIN_STRATEGY_H_
