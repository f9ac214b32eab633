#include "ps_server/local_ps_client.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps_server/keras_rows.h"

namespace pstrain {
namespace {

absl::Status Named(const std::string& name, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(name, ": ", status.message()));
}

class LocalPsClient final : public PsClient {
 public:
  LocalPsClient(int ps_index, VariableStore* store, const CheckpointShards* shards)
      : name_(absl::StrCat("ps task ", ps_index, " (in-process)")),
        store_(store),
        shards_(shards) {}

  using PsClient::CreateVariables;
  using PsClient::Pull;
  using PsClient::PushPull;

  std::string name() const override { return name_; }

  absl::Status CreateVariables(std::vector<NamedTensor> variables,
                               const OptimizerConfig& optimizer,
                               const ConsistencyConfig& consistency) override {
    return Named(name_, store_->CreateVariables(std::move(variables), optimizer, consistency));
  }

  absl::Status CreateVariables(std::vector<NamedTensor> variables,
                               std::vector<InitialShard> drawn, const OptimizerConfig& optimizer,
                               const ConsistencyConfig& consistency) override {
    return Named(name_, store_->CreateVariables(std::move(variables), std::move(drawn),
                                                optimizer, consistency));
  }

  absl::Status CreateVariablesFromKeras(const KerasWeightsFile& file,
                                        std::vector<KerasRowsRequest> shards,
                                        const OptimizerConfig& optimizer,
                                        const ConsistencyConfig& consistency) override {
    return Named(name_, pstrain::CreateVariablesFromKeras(store_, file, shards, optimizer,
                                                          consistency));
  }

  absl::StatusOr<std::vector<Tensor>> Pull(absl::Span<const std::string> names,
                                           std::vector<int64_t>* versions) override {
    absl::StatusOr<std::vector<Tensor>> values = store_->Pull(names, versions);
    if (!values.ok()) return Named(name_, values.status());
    return values;
  }

  absl::Status Push(absl::Span<const NamedTensor> gradients, int64_t) override {
    return Named(name_, store_->Push(gradients));
  }

  absl::StatusOr<std::vector<Tensor>> PushPull(absl::Span<const NamedTensor> gradients,
                                               const PushContext& context,
                                               std::vector<int64_t>* versions) override {
    if (absl::Status pushed = Named(name_, store_->Push(gradients, context)); !pushed.ok()) {
      return pushed;
    }
    std::vector<std::string> names;
    for (const NamedTensor& g : gradients) names.push_back(g.name);
    absl::StatusOr<std::vector<Tensor>> values = Pull(names, versions);
    // As a gRPC client gets them (common/wire_precision.h), so that in-process tests see
    // what a real worker sees.
    if (values.ok()) {
      for (Tensor& value : *values) RoundForWire(context.precision, value.values());
    }
    return values;
  }

  absl::StatusOr<PsStatusResponse> GetStatus() override {
    PsStatusResponse status = DescribeStore(*store_);
    status.set_checkpoint_shards(shards_ != nullptr);
    return status;
  }

  absl::StatusOr<std::vector<VariableSnapshot>> ReadState(
      absl::Span<const std::string> names) override {
    absl::StatusOr<std::vector<VariableSnapshot>> state = store_->ReadState(names);
    if (!state.ok()) return Named(name_, state.status());
    return state;
  }

  absl::Status RestoreState(const std::vector<VariableSnapshot>& snapshots) override {
    return Named(name_, store_->RestoreState(snapshots));
  }

  absl::Status Shutdown(const std::string&) override { return absl::OkStatus(); }

  absl::StatusOr<std::vector<Tensor>> PullRows(absl::Span<const RowsRequest> requests,
                                               std::vector<int64_t>* versions) override {
    std::vector<Tensor> values;
    if (versions != nullptr) versions->clear();
    for (const RowsRequest& r : requests) {
      int64_t version = 0;
      absl::StatusOr<Tensor> rows = store_->PullRows(r.name, r.rows, &version);
      if (!rows.ok()) return Named(name_, rows.status());
      values.push_back(*std::move(rows));
      if (versions != nullptr) versions->push_back(version);
    }
    return values;
  }

  absl::Status PushRows(absl::Span<const SparseGradient> gradients,
                        const PushContext& context) override {
    return Named(name_, store_->PushRows(gradients, context));
  }

  absl::StatusOr<ShardFile> WriteCheckpointShard(const std::string& checkpoint, int ps_index,
                                                 const std::vector<ShardSlice>& slices) override {
    if (shards_ == nullptr) return PsClient::WriteCheckpointShard(checkpoint, ps_index, slices);
    absl::StatusOr<ShardFile> file = shards_->Write(checkpoint, ps_index, slices);
    if (!file.ok()) return Named(name_, file.status());
    return file;
  }

  absl::Status RestoreCheckpointShard(const std::string& checkpoint,
                                      const std::vector<ShardSlice>& slices) override {
    if (shards_ == nullptr) return PsClient::RestoreCheckpointShard(checkpoint, slices);
    return Named(name_, shards_->Restore(checkpoint, slices));
  }

 private:
  const std::string name_;
  VariableStore* store_;                   // Not owned.
  const CheckpointShards* const shards_;   // Not owned; may be null.
};

}  // namespace

std::unique_ptr<PsClient> CreateLocalPsClient(int ps_index, VariableStore* store,
                                              const CheckpointShards* shards) {
  return std::make_unique<LocalPsClient>(ps_index, store, shards);
}

}  // namespace pstrain
