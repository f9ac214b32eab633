#include "ps_server/ps_instance.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "ps_server/checkpoint_shards.h"
#include "ps_server/ps_metrics.h"
#include "ps_server/rpc/ps_service.h"
#include "ps_server/variable_store.h"

namespace pstrain {

PsInstance::PsInstance() = default;
PsInstance::~PsInstance() = default;

absl::StatusOr<std::unique_ptr<PsInstance>> PsInstance::Create(Options options) {
  if (!options.on_shutdown) {
    return absl::InvalidArgumentError("PsInstance: no on_shutdown callback");
  }
  if (options.registry == nullptr) {
    return absl::InvalidArgumentError("PsInstance: no metrics registry");
  }
  if (options.num_workers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("PsInstance: num_workers is ", options.num_workers, ", not >= 0"));
  }
  if (options.request_memory_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PsInstance: request_memory_bytes is ", options.request_memory_bytes, ", not >= 0"));
  }
  std::unique_ptr<PsInstance> ps(new PsInstance());
  ps->store_ = std::make_unique<VariableStore>();
  ps->metrics_ = std::make_unique<PsMetrics>(options.registry, ps->store_.get());
  PsServiceOptions service_options;
  service_options.num_workers = options.num_workers;
  service_options.request_memory_bytes = options.request_memory_bytes;
  ps->service_ = std::make_unique<PsServiceImpl>(ps->store_.get(), std::move(options.on_shutdown),
                                                 service_options);
  ps->service_->set_metrics(ps->metrics_.get());
  if (!options.checkpoint_dir.empty()) {
    CheckpointShards::Options shard_options;
    shard_options.delay_before_sync = options.checkpoint_shard_delay;
    ps->checkpoint_shards_ = std::make_unique<CheckpointShards>(
        ps->store_.get(), options.checkpoint_dir, shard_options);
    ps->service_->set_checkpoint_shards(ps->checkpoint_shards_.get());
    LogInfo(absl::StrCat("writes and restores its checkpoint shards in ",
                         options.checkpoint_dir));
  }
  return ps;
}

grpc::Service* PsInstance::service() { return service_.get(); }

int64_t PsInstance::num_pushes() const { return store_->num_pushes(); }
int64_t PsInstance::num_pulls() const { return store_->num_pulls(); }

void PsInstance::LogFinalStatus(int task_index) const {
  LogFinalPsStatus(task_index, *store_, *metrics_);
}

}  // namespace pstrain
