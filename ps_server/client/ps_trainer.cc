#include "ps_server/client/ps_trainer.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
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
  exchange_versions_.resize(ps_.size());
  exchange_sent_versions_.resize(ps_.size());
  feedback_by_ps_.resize(ps_.size());
  threads_ = std::make_unique<ExchangeThreads>(ps_.size());
  // A split variable's full tensor exists before any pull, so that the per-ps threads
  // write rows into it without ever resizing it. A row-sparse table's is the compact one
  // PullBatchRows makes.
  weights_.resize(layout_.size());
  AllocateSplit(&weights_);
}

void PsTrainer::AllocateSplit(std::vector<Tensor>* weights) const {
  weights->resize(layout_.size());
  for (size_t v = 0; v < layout_.size(); ++v) {
    if (!layout_[v].whole() && !(sparse_ != nullptr && v == 0)) {
      (*weights)[v] = Tensor(layout_[v].shape);
    }
  }
}

void PsTrainer::SetOverlap(bool overlap) {
  if (overlap && sparse_ != nullptr) {
    // The batch's rows are pulled as its step computes, through the same SparseEmbedding
    // the exchange in flight pushes the previous batch's rows with.
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true)) {
      LogWarning("overlap is ignored for a model whose Embedding table moves by rows");
    }
    overlap = false;
  }
  overlap_ = overlap;
  // The second buffer, which the exchange in flight writes into, exists only with overlap.
  if (overlap_ && exchange_weights_.empty()) AllocateSplit(&exchange_weights_);
}

absl::Status PsTrainer::StorePulled(size_t p, std::vector<Tensor> values,
                                    std::vector<int64_t> versions, std::vector<Tensor>* weights,
                                    std::vector<std::vector<int64_t>>* versions_by_ps) {
  if (values.size() != by_ps_[p].size() || versions.size() != values.size()) {
    return absl::InternalError(absl::StrCat(ps_[p]->name(), ": answered ", values.size(),
                                            " values for ", by_ps_[p].size(), " variables"));
  }
  for (size_t k = 0; k < values.size(); ++k) {
    absl::Status stored = PutShard(layout_, by_ps_[p][k], std::move(values[k]), weights);
    if (!stored.ok()) {
      return absl::Status(stored.code(), absl::StrCat(ps_[p]->name(), ": ", stored.message()));
    }
  }
  (*versions_by_ps)[p] = std::move(versions);
  return absl::OkStatus();
}

absl::Status PsTrainer::PullAll() {
  PS_RETURN_IF_ERROR(FinishExchange());
  const int64_t start = absl::GetCurrentTimeNanos();
  std::vector<ExchangeThreads::Task> pulls(ps_.size());
  for (size_t p = 0; p < ps_.size(); ++p) {
    if (by_ps_[p].empty()) continue;
    pulls[p] = [this, p]() -> absl::Status {
      std::vector<int64_t> versions;
      PS_ASSIGN_OR_RETURN(std::vector<Tensor> values, ps_[p]->Pull(names_by_ps_[p], &versions));
      return StorePulled(p, std::move(values), std::move(versions), &weights_, &versions_by_ps_);
    };
  }
  PS_RETURN_IF_ERROR(threads_->Run(std::move(pulls)));
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
  // The step in flight (overlap) is one more than steps_done_: each step its own dropout.
  const int64_t step = steps_done_ + (exchange_in_flight_ ? 1 : 0);
  compute_start_ = absl::GetCurrentTimeNanos();
  PS_ASSIGN_OR_RETURN(StepResult result, step_model_->TrainStep(weights_, *step_x, y,
                                                                dropout_seed_ + step,
                                                                &gradients_));
  compute_end_ = absl::GetCurrentTimeNanos();
  computed_samples_ = result.samples;
  if (send_versions_ || overlap_) computed_versions_by_ps_ = versions_by_ps_;
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
  // Before the exchange in flight ends (it counts then): the position this step pushes as.
  const int64_t step =
      has_position_ ? position_ : steps_done_ + (exchange_in_flight_ ? 1 : 0);
  PS_RETURN_IF_ERROR(FinishExchange());
  exchange_start_ = absl::GetCurrentTimeNanos();
  exchange_compute_ns_ = compute_end_ - compute_start_;
  exchange_samples_ = computed_samples_;
  std::swap(gradients_, exchange_gradients_);
  exchange_context_ = PushContext();
  exchange_context_.worker = worker_;
  exchange_context_.epoch = epoch_;
  exchange_context_.step = step;
  if (send_versions_ || overlap_) std::swap(exchange_sent_versions_, computed_versions_by_ps_);
  ++position_;
  std::vector<ExchangeThreads::Task> exchanges(ps_.size());
  for (size_t p = 0; p < ps_.size(); ++p) {
    if (by_ps_[p].empty() && !(sparse_ != nullptr && sparse_->TouchesPs(p))) continue;
    exchanges[p] = [this, p] { return ExchangeWith(p); };
  }
  exchange_in_flight_ = true;
  // With overlap, into the other buffer: this thread computes on weights_ meanwhile.
  exchange_weights_into_ = overlap_ ? &exchange_weights_ : &weights_;
  exchange_versions_into_ = overlap_ ? &exchange_versions_ : &versions_by_ps_;
  if (overlap_) {
    absl::Status started = threads_->Start(std::move(exchanges));
    if (!started.ok()) {
      exchange_in_flight_ = false;
      have_weights_ = false;
      return started;
    }
    return absl::OkStatus();
  }
  // Not overlapped: the exchange runs to its end now, one ps on this thread.
  absl::Status exchanged = threads_->Run(std::move(exchanges));
  return FinishExchange(std::move(exchanged));
}

absl::Status PsTrainer::Flush() { return FinishExchange(); }

absl::Status PsTrainer::FinishExchange() {
  if (!exchange_in_flight_) return absl::OkStatus();
  return FinishExchange(threads_->Wait());
}

absl::Status PsTrainer::FinishExchange(absl::Status exchanged) {
  exchange_in_flight_ = false;
  if (!exchanged.ok()) {
    // The pulled values may be half there; pull them all again before the next step.
    have_weights_ = false;
    if (metrics_ != nullptr) metrics_->RecordRetry();
    return exchanged;
  }
  if (exchange_weights_into_ != &weights_) {
    // The overlapped exchange's buffer becomes the weights (never a row-sparse trainer's:
    // SetOverlap refuses it).
    std::swap(weights_, exchange_weights_);
    std::swap(versions_by_ps_, exchange_versions_);
  }
  if (metrics_ != nullptr) {
    metrics_->RecordStep(exchange_samples_, absl::Nanoseconds(exchange_compute_ns_),
                         absl::Nanoseconds(absl::GetCurrentTimeNanos() - exchange_start_));
  }
  ++steps_done_;
  return absl::OkStatus();
}

absl::Status PsTrainer::ExchangeWith(size_t p) {
  PushContext context = exchange_context_;
  if (sparse_ != nullptr && sparse_->TouchesPs(p)) {
    // Before the dense push takes the gradients apart; the table's gradient is variable 0's.
    PS_RETURN_IF_ERROR(sparse_->PushShardRows(p, exchange_gradients_[0], context));
  }
  if (by_ps_[p].empty()) return absl::OkStatus();
  if (send_versions_ || overlap_) context.versions = exchange_sent_versions_[p];
  std::vector<NamedTensor> grads;
  grads.reserve(by_ps_[p].size());
  for (const ShardRef& ref : by_ps_[p]) {
    if (layout_[ref.variable].whole()) {
      // Only this ps holds the variable: hand over the gradient without a copy.
      grads.push_back({ref.entry.name(), std::move(exchange_gradients_[ref.variable])});
    } else {
      // Other threads read other rows of the same gradient: slice, never move.
      PS_ASSIGN_OR_RETURN(Tensor rows, SliceShard(exchange_gradients_[ref.variable], ref.entry));
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
  return StorePulled(p, std::move(values), std::move(versions), exchange_weights_into_,
                     exchange_versions_into_);
}

}  // namespace pstrain
