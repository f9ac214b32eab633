#include "ps_server/client/ps_trainer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/parallel.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<PsTrainer>> PsTrainer::Create(
    Model* model, std::vector<PsClient*> ps, const std::vector<VariablePlacementEntry>& placement,
    uint64_t dropout_seed, EmbeddingTraffic embedding_traffic) {
  std::vector<VariableShape> shapes;
  for (const VariableSpec& spec : model->variables()) {
    shapes.push_back({spec.name, spec.shape});
  }
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout,
                      ResolveLayout(shapes, placement, static_cast<int>(ps.size())));
  std::unique_ptr<SparseEmbedding> sparse;
  if (embedding_traffic == EmbeddingTraffic::kRowSparse && HasRowSparseEmbedding(*model)) {
    PS_ASSIGN_OR_RETURN(sparse, SparseEmbedding::Create(*model, layout[0], ps));
  }
  return std::unique_ptr<PsTrainer>(new PsTrainer(model, std::move(ps), std::move(layout),
                                                  dropout_seed, std::move(sparse)));
}

PsTrainer::PsTrainer(Model* model, std::vector<PsClient*> ps, std::vector<VariableLayout> layout,
                     uint64_t dropout_seed, std::unique_ptr<SparseEmbedding> sparse)
    : model_(model),
      ps_(std::move(ps)),
      layout_(std::move(layout)),
      sparse_(std::move(sparse)),
      step_model_(model),
      dropout_seed_(dropout_seed) {
  by_ps_ = ShardsByPs(layout_, static_cast<int>(ps_.size()));
  if (sparse_ != nullptr) {
    // The table moves by rows (sparse_), never whole.
    for (std::vector<ShardRef>& shards : by_ps_) {
      shards.erase(std::remove_if(shards.begin(), shards.end(),
                                  [](const ShardRef& ref) { return ref.variable == 0; }),
                   shards.end());
    }
  }
  for (const std::vector<ShardRef>& shards : by_ps_) names_by_ps_.push_back(ShardNames(shards));
  versions_by_ps_.resize(ps_.size());
  feedback_by_ps_.resize(ps_.size());
  // A split variable's full tensor exists before any pull, so that the per-ps threads
  // write rows into it without ever resizing it. A row-sparse table's is the compact one
  // PullBatchRows makes.
  weights_.resize(layout_.size());
  for (size_t v = 0; v < layout_.size(); ++v) {
    if (!layout_[v].whole() && !(sparse_ != nullptr && v == 0)) {
      weights_[v] = Tensor(layout_[v].shape);
    }
  }
}

absl::Status PsTrainer::StorePulled(size_t p, std::vector<Tensor> values,
                                    std::vector<int64_t> versions) {
  if (values.size() != by_ps_[p].size() || versions.size() != values.size()) {
    return absl::InternalError(absl::StrCat(ps_[p]->name(), ": answered ", values.size(),
                                            " values for ", by_ps_[p].size(), " variables"));
  }
  for (size_t k = 0; k < values.size(); ++k) {
    absl::Status stored = PutShard(layout_, by_ps_[p][k], std::move(values[k]), &weights_);
    if (!stored.ok()) {
      return absl::Status(stored.code(), absl::StrCat(ps_[p]->name(), ": ", stored.message()));
    }
  }
  versions_by_ps_[p] = std::move(versions);
  return absl::OkStatus();
}

absl::Status PsTrainer::PullAll() {
  const int64_t start = absl::GetCurrentTimeNanos();
  std::vector<std::function<absl::Status()>> pulls;
  for (size_t p = 0; p < ps_.size(); ++p) {
    if (by_ps_[p].empty()) continue;
    pulls.push_back([this, p]() -> absl::Status {
      std::vector<int64_t> versions;
      PS_ASSIGN_OR_RETURN(std::vector<Tensor> values, ps_[p]->Pull(names_by_ps_[p], &versions));
      return StorePulled(p, std::move(values), std::move(versions));
    });
  }
  PS_RETURN_IF_ERROR(RunConcurrently(pulls));
  if (metrics_ != nullptr) {
    metrics_->RecordPull(absl::Nanoseconds(absl::GetCurrentTimeNanos() - start));
  }
  have_weights_ = true;
  return absl::OkStatus();
}

absl::StatusOr<StepResult> PsTrainer::Step(const Tensor& x, const Tensor& y) {
  PS_ASSIGN_OR_RETURN(StepResult result, ComputeGradients(x, y));
  PS_RETURN_IF_ERROR(PushGradients());
  return result;
}

absl::StatusOr<StepResult> PsTrainer::ComputeGradients(const Tensor& x, const Tensor& y) {
  if (!have_weights_) PS_RETURN_IF_ERROR(PullAll());
  const Tensor* step_x = &x;
  step_model_ = model_;
  if (sparse_ != nullptr) {
    const int64_t pull_start = absl::GetCurrentTimeNanos();
    PS_ASSIGN_OR_RETURN(step_model_, sparse_->PullBatchRows(x, &weights_[0]));
    step_x = &sparse_->local_x();
    if (metrics_ != nullptr) {
      metrics_->RecordPull(absl::Nanoseconds(absl::GetCurrentTimeNanos() - pull_start));
    }
  }
  compute_start_ = absl::GetCurrentTimeNanos();
  PS_ASSIGN_OR_RETURN(StepResult result, step_model_->TrainStep(weights_, *step_x, y,
                                                                dropout_seed_ + steps_done_,
                                                                &gradients_));
  compute_end_ = absl::GetCurrentTimeNanos();
  computed_samples_ = result.samples;
  return result;
}

absl::Status PsTrainer::PushGradients() {
  if (gradients_.size() != layout_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("PushGradients: ", gradients_.size(),
                                                   " gradients for ", layout_.size(),
                                                   " variables (ComputeGradients first)"));
  }
  for (size_t v = 0; v < layout_.size(); ++v) {
    if (gradients_[v].shape() != weights_[v].shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the gradient for \"", model_->variables()[v].name, "\" is ",
          gradients_[v].ShapeString(), ", the variable ", weights_[v].ShapeString()));
    }
  }
  const int64_t exchange_start = absl::GetCurrentTimeNanos();
  const int64_t step = has_position_ ? position_ : steps_done_;
  std::vector<std::function<absl::Status()>> exchanges;
  for (size_t p = 0; p < ps_.size(); ++p) {
    if (by_ps_[p].empty() && !(sparse_ != nullptr && sparse_->TouchesPs(p))) continue;
    exchanges.push_back([this, p, step] { return ExchangeWith(p, step); });
  }
  absl::Status exchanged = RunConcurrently(exchanges);
  if (!exchanged.ok()) {
    // The local weights may be half-updated; pull them all again before the next step.
    have_weights_ = false;
    if (metrics_ != nullptr) metrics_->RecordRetry();
    return exchanged;
  }
  if (metrics_ != nullptr) {
    metrics_->RecordStep(computed_samples_, absl::Nanoseconds(compute_end_ - compute_start_),
                         absl::Nanoseconds(absl::GetCurrentTimeNanos() - exchange_start));
  }
  ++steps_done_;
  ++position_;
  return absl::OkStatus();
}

absl::Status PsTrainer::ExchangeWith(size_t p, int64_t step) {
  PushContext context;
  context.worker = worker_;
  context.epoch = epoch_;
  context.step = step;
  if (sparse_ != nullptr && sparse_->TouchesPs(p)) {
    // Before the dense push takes gradients_ apart; the table's gradient is variable 0's.
    PS_RETURN_IF_ERROR(sparse_->PushShardRows(p, gradients_[0], context));
  }
  if (by_ps_[p].empty()) return absl::OkStatus();
  if (send_versions_) context.versions = versions_by_ps_[p];
  std::vector<NamedTensor> grads;
  grads.reserve(by_ps_[p].size());
  for (const ShardRef& ref : by_ps_[p]) {
    if (layout_[ref.variable].whole()) {
      // Only this ps holds the variable: hand over the gradient without a copy.
      grads.push_back({ref.entry.name(), std::move(gradients_[ref.variable])});
    } else {
      // Other threads read other rows of the same gradient: slice, never move.
      PS_ASSIGN_OR_RETURN(Tensor rows, SliceShard(gradients_[ref.variable], ref.entry));
      grads.push_back({ref.entry.name(), std::move(rows)});
    }
  }
  if (precision_ != WirePrecision::kFloat32) {
    context.precision = precision_;
    for (size_t k = 0; k < grads.size(); ++k) {
      feedback_by_ps_[p].Round(precision_, k, grads[k].tensor.values());
    }
  }
  std::vector<int64_t> versions;
  PS_ASSIGN_OR_RETURN(std::vector<Tensor> values, ps_[p]->PushPull(grads, context, &versions));
  return StorePulled(p, std::move(values), std::move(versions));
}

}  // namespace pstrain
