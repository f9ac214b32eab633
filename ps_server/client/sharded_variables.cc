#include "ps_server/client/sharded_variables.h"

#include <functional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/keras_import.h"
#include "common/checkpoint/keras_weights_h5.h"
#include "common/checkpoint/zip_archive.h"
#include "common/logging.h"
#include "common/parallel.h"
#include "common/sharding/placement.h"
#include "common/sharding/shards_by_ps.h"
#include "common/status_macros.h"

namespace pstrain {

ShardedVariables::ShardedVariables(const Model* model, std::vector<PsClient*> ps,
                                   OptimizerConfig optimizer, ConsistencyConfig consistency)
    : model_(model),
      ps_(std::move(ps)),
      optimizer_(std::move(optimizer)),
      consistency_(std::move(consistency)) {}

std::vector<VariableShape> ShardedVariables::Shapes() const {
  std::vector<VariableShape> shapes;
  for (const VariableSpec& spec : model_->variables()) {
    shapes.push_back({spec.name, spec.shape});
  }
  return shapes;
}

std::vector<std::vector<InitialShard>> ShardedVariables::DrawnShards(
    const std::vector<VariableLayout>& layout, uint64_t seed) const {
  std::vector<std::vector<InitialShard>> per_ps(ps_.size());
  const std::vector<std::vector<ShardRef>> shards = ShardsByPs(layout, num_ps());
  for (size_t p = 0; p < shards.size(); ++p) {
    for (const ShardRef& ref : shards[p]) {
      // The layout is in the model's order: ref.variable indexes its variables.
      per_ps[p].push_back({ref.entry.name(),
                           model_->InitialValuesOf(static_cast<size_t>(ref.variable), seed),
                           ref.entry.row_offset(), ref.entry.row_offset() + ref.entry.num_rows()});
    }
  }
  return per_ps;
}

absl::StatusOr<ShardedVariables::InitialShards> ShardedVariables::InitialShardsFor(
    const std::vector<VariableLayout>& layout, uint64_t seed) const {
  InitialShards out;
  if (initial_values_ == nullptr) {
    out.drawn = DrawnShards(layout, seed);
    out.values.resize(ps_.size());
    return out;
  }
  PS_ASSIGN_OR_RETURN(out.values, ScatterValues(layout, num_ps(), *initial_values_));
  out.drawn.resize(ps_.size());
  return out;
}

absl::StatusOr<std::shared_ptr<const std::vector<Tensor>>> ShardedVariables::WholeFileWeights()
    const {
  absl::MutexLock lock(&file_mu_);
  if (file_weights_ == nullptr) {
    PS_ASSIGN_OR_RETURN(KerasModelFile file, ReadKerasFile(initial_weights_file_));
    if (file.weights.size() != model_->variables().size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          initial_weights_file_, " holds ", file.weights.size(), " variables, the model ",
          model_->variables().size()));
    }
    file_weights_ = std::make_shared<const std::vector<Tensor>>(std::move(file.weights));
  }
  return file_weights_;
}

absl::Status ShardedVariables::CreateFromFile(size_t p,
                                              const std::vector<VariableLayout>& layout) const {
  // The file as this task sees it: a ps that sees another file under the path refuses.
  absl::StatusOr<ZipMemberInfo> member = StatZipMember(initial_weights_file_, kKerasWeightsMember);
  if (!member.ok()) return member.status();
  const std::vector<std::string> datasets = KerasWeightDatasets(*model_);
  std::vector<KerasRowsRequest> rows;
  const std::vector<std::vector<ShardRef>> shards = ShardsByPs(layout, num_ps());
  for (const ShardRef& ref : shards[p]) {
    const VariableLayout& v = layout[static_cast<size_t>(ref.variable)];
    // A scalar is one row; an unsplit variable is all its rows.
    rows.push_back({ref.entry.name(), datasets.at(static_cast<size_t>(ref.variable)), v.shape,
                    v.shape.empty() ? 0 : ref.entry.row_offset(),
                    v.shape.empty() ? 1 : ref.entry.row_offset() + ref.entry.num_rows()});
  }
  if (rows.empty()) return absl::OkStatus();
  const absl::Status read = ps_[p]->CreateVariablesFromKeras(
      {initial_weights_file_, *member}, std::move(rows), optimizer_, consistency_);
  if (read.ok()) {
    LogInfo(absl::StrCat(ps_[p]->name(), " read its rows of ", initial_weights_file_,
                         " itself"));
    return read;
  }
  if (!absl::IsFailedPrecondition(read) && !absl::IsUnimplemented(read)) return read;
  LogWarning(absl::StrCat(read.message(), "; so this task reads the file whole and sends ",
                          ps_[p]->name(), " its rows"));
  PS_ASSIGN_OR_RETURN(std::shared_ptr<const std::vector<Tensor>> whole, WholeFileWeights());
  PS_ASSIGN_OR_RETURN(std::vector<std::vector<NamedTensor>> values,
                      ScatterValues(layout, num_ps(), *whole));
  return ps_[p]->CreateVariables(std::move(values[p]), {}, optimizer_, consistency_);
}

absl::Status ShardedVariables::Create(const PlacementPolicy& policy, uint64_t seed) {
  const std::vector<VariableShape> shapes = Shapes();
  PS_ASSIGN_OR_RETURN(std::vector<VariablePlacementEntry> placement,
                      PlaceVariables(shapes, num_ps(), policy));
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout,
                      ResolveLayout(shapes, placement, num_ps()));
  std::vector<std::function<absl::Status()>> creates;
  if (initial_values_ == nullptr && !initial_weights_file_.empty()) {
    for (size_t p = 0; p < ps_.size(); ++p) {
      creates.push_back([this, p, &layout] { return CreateFromFile(p, layout); });
    }
    PS_RETURN_IF_ERROR(RunConcurrently(creates));
    absl::MutexLock lock(&mu_);
    placement_ = std::move(placement);
    return absl::OkStatus();
  }
  PS_ASSIGN_OR_RETURN(InitialShards initial, InitialShardsFor(layout, seed));
  for (size_t p = 0; p < ps_.size(); ++p) {
    creates.push_back([this, p, &initial] {
      return ps_[p]->CreateVariables(std::move(initial.values[p]), std::move(initial.drawn[p]),
                                     optimizer_, consistency_);
    });
  }
  PS_RETURN_IF_ERROR(RunConcurrently(creates));
  absl::MutexLock lock(&mu_);
  placement_ = std::move(placement);
  return absl::OkStatus();
}

std::vector<VariablePlacementEntry> ShardedVariables::placement() const {
  absl::MutexLock lock(&mu_);
  return placement_;
}

absl::StatusOr<std::vector<VariableLayout>> ShardedVariables::Layout() const {
  const std::vector<VariablePlacementEntry> current = placement();
  if (current.empty()) return absl::InvalidArgumentError("the variables are not placed yet");
  return ResolveLayout(Shapes(), current, num_ps());
}

absl::StatusOr<std::vector<Tensor>> ShardedVariables::Pull(bool skip_first) const {
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, Layout());
  if (skip_first && !layout.empty()) layout.erase(layout.begin());
  PS_ASSIGN_OR_RETURN(
      std::vector<Tensor> values,
      GatherValues(layout, num_ps(), [this](int p, const std::vector<std::string>& names) {
        return ps_[p]->Pull(names);
      }));
  if (skip_first) values.insert(values.begin(), Tensor());
  return values;
}

absl::StatusOr<std::vector<VariableSnapshot>> ShardedVariables::ReadStates() const {
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, Layout());
  return GatherStates(layout, num_ps(), [this](int p, const std::vector<std::string>& names) {
    return ps_[p]->ReadState(names);
  });
}

absl::Status ShardedVariables::Restore(const TrainingState& state,
                                       const std::string& source) const {
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, Layout());
  PS_ASSIGN_OR_RETURN(std::vector<VariableSnapshot> variables,
                      VariablesForModel(state, model_->variables(), source));
  PS_ASSIGN_OR_RETURN(std::vector<std::vector<VariableSnapshot>> per_ps,
                      ScatterStates(layout, num_ps(), variables));
  std::vector<std::function<absl::Status()>> restores;
  for (size_t p = 0; p < ps_.size(); ++p) {
    if (per_ps[p].empty()) continue;
    restores.push_back([this, p, &per_ps] { return ps_[p]->RestoreState(per_ps[p]); });
  }
  return RunConcurrently(restores);
}

absl::StatusOr<std::vector<std::vector<ShardSlice>>> ShardedVariables::SlicesByPs() const {
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, Layout());
  std::vector<std::vector<ShardSlice>> slices(ps_.size());
  const std::vector<std::vector<ShardRef>> shards = ShardsByPs(layout, num_ps());
  for (size_t p = 0; p < shards.size(); ++p) {
    for (const ShardRef& ref : shards[p]) {
      const VariableLayout& v = layout[static_cast<size_t>(ref.variable)];
      ShardSlice slice;
      slice.shard = ref.entry.name();
      slice.variable = v.name;
      slice.variable_shape = v.shape;
      // A scalar is one row; an unsplit variable is all its rows.
      slice.row_begin = v.shape.empty() ? 0 : ref.entry.row_offset();
      slice.row_end = v.shape.empty() ? 1 : ref.entry.row_offset() + ref.entry.num_rows();
      slices[p].push_back(std::move(slice));
    }
  }
  return slices;
}

absl::StatusOr<std::string> ShardedVariables::WhyNoShardedCheckpoints() const {
  for (size_t p = 0; p < ps_.size(); ++p) {
    PS_ASSIGN_OR_RETURN(PsStatusResponse status, ps_[p]->GetStatus());
    if (!status.checkpoint_shards()) {
      return absl::StrCat(ps_[p]->name(), " has no --checkpoint_dir");
    }
  }
  return std::string();
}

absl::StatusOr<std::vector<ShardFile>> ShardedVariables::WriteCheckpointShards(
    const std::string& temp) const {
  PS_ASSIGN_OR_RETURN(std::vector<std::vector<ShardSlice>> slices, SlicesByPs());
  std::vector<absl::StatusOr<ShardFile>> written(ps_.size());
  std::vector<std::function<absl::Status()>> writes;
  for (size_t p = 0; p < ps_.size(); ++p) {
    if (slices[p].empty()) continue;
    writes.push_back([this, p, &temp, &slices, &written] {
      written[p] = ps_[p]->WriteCheckpointShard(temp, static_cast<int>(p), slices[p]);
      return written[p].status();
    });
  }
  PS_RETURN_IF_ERROR(RunConcurrently(writes));
  std::vector<ShardFile> files;
  for (size_t p = 0; p < ps_.size(); ++p) {
    if (!slices[p].empty()) files.push_back(*std::move(written[p]));
  }
  return files;
}

absl::Status ShardedVariables::RestoreCheckpointShards(const std::string& name, int only) const {
  PS_ASSIGN_OR_RETURN(std::vector<std::vector<ShardSlice>> slices, SlicesByPs());
  std::vector<std::function<absl::Status()>> restores;
  for (size_t p = 0; p < ps_.size(); ++p) {
    if (slices[p].empty() || (only >= 0 && static_cast<int>(p) != only)) continue;
    restores.push_back(
        [this, p, &name, &slices] { return ps_[p]->RestoreCheckpointShard(name, slices[p]); });
  }
  return RunConcurrently(restores);
}

absl::StatusOr<ShardedVariables::Census> ShardedVariables::TakeCensus() const {
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, Layout());
  const std::vector<std::vector<ShardRef>> expected = ShardsByPs(layout, num_ps());
  Census census;
  for (size_t p = 0; p < ps_.size(); ++p) {
    absl::StatusOr<PsStatusResponse> status = ps_[p]->GetStatus();
    if (!status.ok()) {
      census.unreachable.push_back(std::string(status.status().message()));
      continue;
    }
    absl::flat_hash_set<std::string> held;
    for (const VariableInfo& v : status->variables()) held.insert(v.name());
    for (const ShardRef& shard : expected[p]) {
      if (!held.contains(shard.entry.name())) {
        census.emptied.push_back(static_cast<int>(p));
        break;
      }
    }
  }
  return census;
}

absl::Status ShardedVariables::Recreate(int p, const TrainingState* state,
                                        const std::string& source, uint64_t seed) const {
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout, Layout());
  if (state == nullptr && initial_values_ == nullptr && !initial_weights_file_.empty()) {
    return CreateFromFile(static_cast<size_t>(p), layout);
  }
  if (state == nullptr) {
    // Only this ps's shards: a drawn variable is drawn by the ps, its rows only.
    PS_ASSIGN_OR_RETURN(InitialShards initial, InitialShardsFor(layout, seed));
    return ps_[p]->CreateVariables(std::move(initial.values[p]), std::move(initial.drawn[p]),
                                   optimizer_, consistency_);
  }
  PS_ASSIGN_OR_RETURN(std::vector<VariableSnapshot> variables,
                      VariablesForModel(*state, model_->variables(), source));
  PS_ASSIGN_OR_RETURN(std::vector<std::vector<VariableSnapshot>> saved,
                      ScatterStates(layout, num_ps(), variables));
  // The values first (CreateVariables), then the slots and counts.
  std::vector<NamedTensor> shards;
  for (const VariableSnapshot& s : saved[p]) shards.push_back({s.name, s.value});
  PS_RETURN_IF_ERROR(ps_[p]->CreateVariables(std::move(shards), optimizer_, consistency_));
  return ps_[p]->RestoreState(saved[p]);
}

}  // namespace pstrain
