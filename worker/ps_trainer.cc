#include "worker/ps_trainer.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<PsTrainer>> PsTrainer::Create(
    Model* model, std::vector<PsClient*> ps, const std::vector<VariablePlacementEntry>& placement,
    uint64_t dropout_seed) {
  absl::flat_hash_map<std::string, const VariablePlacementEntry*> by_name;
  for (const VariablePlacementEntry& entry : placement) by_name[entry.name()] = &entry;
  std::vector<int> owner;
  for (const VariableSpec& spec : model->trainable_variables()) {
    auto it = by_name.find(spec.name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", spec.name, "\" has no placement on any ps"));
    }
    const VariablePlacementEntry& entry = *it->second;
    if (std::vector<int64_t>(entry.shape().begin(), entry.shape().end()) != spec.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable \"", spec.name, "\" is placed with shape ",
          ShapeToString(std::vector<int64_t>(entry.shape().begin(), entry.shape().end())),
          " but the model has ", ShapeToString(spec.shape)));
    }
    if (entry.ps_index() < 0 || entry.ps_index() >= static_cast<int>(ps.size())) {
      return absl::InvalidArgumentError(absl::StrCat("variable \"", spec.name,
                                                     "\" is placed on ps ", entry.ps_index(),
                                                     " of ", ps.size()));
    }
    owner.push_back(entry.ps_index());
  }
  return std::unique_ptr<PsTrainer>(
      new PsTrainer(model, std::move(ps), std::move(owner), dropout_seed));
}

PsTrainer::PsTrainer(Model* model, std::vector<PsClient*> ps, std::vector<int> owner,
                     uint64_t dropout_seed)
    : model_(model), ps_(std::move(ps)), owner_(std::move(owner)), dropout_seed_(dropout_seed) {
  by_ps_.resize(ps_.size());
  const std::vector<VariableSpec>& specs = model_->trainable_variables();
  for (size_t i = 0; i < owner_.size(); ++i) {
    by_ps_[owner_[i]].push_back(static_cast<int>(i));
    names_.push_back(specs[i].name);
  }
  weights_.resize(owner_.size());
}

absl::Status PsTrainer::PullAll() {
  std::vector<std::function<absl::Status()>> pulls;
  for (size_t p = 0; p < ps_.size(); ++p) {
    if (by_ps_[p].empty()) continue;
    pulls.push_back([this, p]() -> absl::Status {
      std::vector<std::string> names;
      for (int i : by_ps_[p]) names.push_back(names_[i]);
      PS_ASSIGN_OR_RETURN(std::vector<Tensor> values, ps_[p]->Pull(names));
      for (size_t k = 0; k < values.size(); ++k) weights_[by_ps_[p][k]] = std::move(values[k]);
      return absl::OkStatus();
    });
  }
  PS_RETURN_IF_ERROR(RunConcurrently(pulls));
  have_weights_ = true;
  return absl::OkStatus();
}

absl::StatusOr<StepResult> PsTrainer::Step(const Tensor& x, const Tensor& y) {
  if (!have_weights_) PS_RETURN_IF_ERROR(PullAll());
  PS_ASSIGN_OR_RETURN(StepResult result,
                      model_->TrainStep(weights_, x, y, dropout_seed_ + steps_done_, &gradients_));
  const int64_t step = steps_done_;
  std::vector<std::function<absl::Status()>> exchanges;
  for (size_t p = 0; p < ps_.size(); ++p) {
    if (by_ps_[p].empty()) continue;
    exchanges.push_back([this, p, step]() -> absl::Status {
      std::vector<NamedTensor> grads;
      grads.reserve(by_ps_[p].size());
      for (int i : by_ps_[p]) grads.push_back({names_[i], std::move(gradients_[i])});
      PS_ASSIGN_OR_RETURN(std::vector<Tensor> values, ps_[p]->PushPull(grads, step));
      for (size_t k = 0; k < values.size(); ++k) weights_[by_ps_[p][k]] = std::move(values[k]);
      return absl::OkStatus();
    });
  }
  absl::Status exchanged = RunConcurrently(exchanges);
  if (!exchanged.ok()) {
    // The local weights may be half-updated; pull them all again before the next step.
    have_weights_ = false;
    return exchanged;
  }
  ++steps_done_;
  return result;
}

}  // namespace pstrain
