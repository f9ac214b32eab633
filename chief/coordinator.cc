#include "chief/coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "ps_server/placement.h"

namespace pstrain {

std::string FormatEpochLine(const EpochSummary& s) {
  std::string line = absl::StrFormat("Epoch %d/%d - loss: %.4f - accuracy: %.4f", s.epoch,
                                     s.epochs, s.loss, s.accuracy);
  if (s.has_validation) {
    absl::StrAppendFormat(&line, " - val_loss: %.4f - val_accuracy: %.4f", s.val_loss,
                          s.val_accuracy);
  }
  return line;
}

Coordinator::Coordinator(Options options, const JobSpec* job, Model* model,
                         Membership* membership, std::vector<PsClient*> ps,
                         std::vector<WorkerClient*> workers, const Dataset* validation,
                         const ShutdownSignal* abort,
                         std::function<void(const EpochSummary&)> on_epoch)
    : options_(options),
      job_(job),
      model_(model),
      membership_(membership),
      ps_(std::move(ps)),
      workers_(std::move(workers)),
      validation_(validation),
      abort_(abort),
      on_epoch_(std::move(on_epoch)) {}

void Coordinator::SetPhase(const std::string& phase) {
  absl::MutexLock lock(&mu_);
  phase_ = phase;
}

void Coordinator::Describe(ChiefStatusResponse* response) const {
  absl::MutexLock lock(&mu_);
  response->set_phase(phase_);
  response->set_epoch(epoch_);
  response->set_global_step(global_step_);
  for (const VariablePlacementEntry& e : placement_) *response->add_placement() = e;
}

absl::Status Coordinator::Run() {
  absl::Status status = [&]() -> absl::Status {
    PS_RETURN_IF_ERROR(membership_->WaitForAll(options_.register_timeout, abort_));
    LogInfo(absl::StrCat("all ", ps_.size(), " ps and ", workers_.size(),
                         " worker tasks registered"));
    PS_RETURN_IF_ERROR(WaitForWorkersReady());
    PS_RETURN_IF_ERROR(CreateVariables());
    SetPhase("training");
    for (const VariablePlacementEntry& e : placement_) {
      LogInfo(absl::StrCat(
          "variable ", e.name(), " ",
          ShapeToString(std::vector<int64_t>(e.shape().begin(), e.shape().end())),
          e.num_shards() > 1 ? absl::StrCat(" (rows ", e.row_offset(), "-",
                                            e.row_offset() + e.num_rows() - 1, " of ",
                                            e.variable_name(), ")")
                             : "",
          " on ps ", e.ps_index()));
    }
    for (int epoch = 0; epoch < job_->epochs; ++epoch) {
      {
        absl::MutexLock lock(&mu_);
        epoch_ = epoch + 1;
      }
      const absl::Time start = absl::Now();
      EpochSummary summary;
      summary.epoch = epoch + 1;
      summary.epochs = job_->epochs;
      PS_RETURN_IF_ERROR(RunEpoch(epoch, &summary));
      if (validation_ != nullptr) PS_RETURN_IF_ERROR(Validate(&summary));
      summary.elapsed = absl::Now() - start;
      on_epoch_(summary);
    }
    return absl::OkStatus();
  }();
  SetPhase(status.ok() ? "done" : "failed");
  return status;
}

absl::Status Coordinator::WaitForWorkersReady() {
  const absl::Time give_up = absl::Now() + options_.register_timeout;
  for (WorkerClient* worker : workers_) {
    while (true) {
      absl::StatusOr<WorkerStatusResponse> status = worker->GetStatus();
      if (status.ok() && status->ready()) break;
      if (absl::Now() >= give_up) {
        return absl::DeadlineExceededError(absl::StrCat(
            worker->name(), " registered but did not become ready within ",
            absl::FormatDuration(options_.register_timeout),
            status.ok() ? "" : absl::StrCat(": ", status.status().message())));
      }
      if (abort_ != nullptr && abort_->WaitFor(absl::Milliseconds(50))) {
        return absl::CancelledError("the chief is shutting down");
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Coordinator::CreateVariables() {
  std::vector<VariableShape> shapes;
  for (const VariableSpec& spec : model_->trainable_variables()) {
    shapes.push_back({spec.name, spec.shape});
  }
  const int num_ps = static_cast<int>(ps_.size());
  PS_ASSIGN_OR_RETURN(std::vector<VariablePlacementEntry> placement,
                      PlaceVariables(shapes, num_ps, options_.placement_policy));
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout,
                      ResolveLayout(shapes, placement, num_ps));
  std::vector<Tensor> initial = model_->InitialValues(job_->seed);
  std::vector<std::vector<NamedTensor>> per_ps(ps_.size());
  for (size_t i = 0; i < layout.size(); ++i) {
    if (layout[i].whole()) {
      const VariablePlacementEntry& shard = layout[i].shards[0];
      per_ps[shard.ps_index()].push_back({shard.name(), std::move(initial[i])});
      continue;
    }
    for (const VariablePlacementEntry& shard : layout[i].shards) {
      PS_ASSIGN_OR_RETURN(Tensor rows, SliceShard(initial[i], shard));
      per_ps[shard.ps_index()].push_back({shard.name(), std::move(rows)});
    }
  }
  // Every worker pushes its own batch's gradient: with scale_learning_rate the rate grows
  // with the global batch (per-replica batch x workers), the seed's best practice.
  OptimizerConfig optimizer = job_->optimizer;
  if (job_->scale_learning_rate) {
    optimizer.set_learning_rate(optimizer.learning_rate() * static_cast<float>(workers_.size()));
  }
  std::vector<std::function<absl::Status()>> creates;
  for (size_t p = 0; p < ps_.size(); ++p) {
    creates.push_back([this, p, &per_ps, &optimizer] {
      return ps_[p]->CreateVariables(std::move(per_ps[p]), optimizer, options_.consistency);
    });
  }
  PS_RETURN_IF_ERROR(RunConcurrently(creates));
  LogInfo(absl::StrCat("placement: ", DescribePolicy(options_.placement_policy), "; ",
                       placement.size(), " shards of ", shapes.size(), " variables on ",
                       num_ps, " ps"));
  if (!options_.consistency.mode().empty() && options_.consistency.mode() != "async") {
    LogInfo(absl::StrCat("consistency: ", options_.consistency.mode(),
                         options_.consistency.mode() == "sync"
                             ? absl::StrCat(", aggregating ",
                                            options_.consistency.replicas_to_aggregate(),
                                            " gradients")
                             : absl::StrCat(", staleness ", options_.consistency.staleness()),
                         ", timeout ", options_.consistency.timeout_ms(), " ms"));
  }
  absl::MutexLock lock(&mu_);
  placement_ = std::move(placement);
  return absl::OkStatus();
}

absl::Status Coordinator::RunEpoch(int epoch, EpochSummary* summary) {
  const int num_workers = static_cast<int>(workers_.size());
  // With steps_per_epoch (global steps, as Keras counts them) each worker runs its share
  // over repeating data; without it each worker runs one pass over its shard.
  const int64_t budget =
      job_->steps_per_epoch > 0
          ? std::max<int64_t>(1, (job_->steps_per_epoch + num_workers - 1) / num_workers)
          : -1;
  std::vector<RunStepsResponse> totals(num_workers);
  std::vector<std::function<absl::Status()>> runs;
  for (int w = 0; w < num_workers; ++w) {
    runs.push_back([this, w, epoch, budget, num_workers, &totals]() -> absl::Status {
      RunStepsRequest request;
      request.set_epoch(epoch);
      request.set_batch_size(job_->batch_size);
      request.set_num_shards(num_workers);
      request.set_shard_index(w);
      {
        absl::MutexLock lock(&mu_);
        for (const VariablePlacementEntry& e : placement_) *request.add_placement() = e;
      }
      for (const std::string& address : options_.ps_addresses) request.add_ps_addresses(address);
      int64_t done = 0;
      while (budget < 0 || done < budget) {
        if (abort_ != nullptr && abort_->requested()) {
          return absl::CancelledError("the chief is shutting down");
        }
        request.set_first_step(done);
        request.set_steps(budget < 0 ? options_.steps_per_call
                                     : std::min(options_.steps_per_call, budget - done));
        PS_ASSIGN_OR_RETURN(RunStepsResponse response, workers_[w]->RunSteps(request));
        done += response.steps();
        totals[w].set_loss_sum(totals[w].loss_sum() + response.loss_sum());
        totals[w].set_correct(totals[w].correct() + response.correct());
        totals[w].set_samples(totals[w].samples() + response.samples());
        {
          absl::MutexLock lock(&mu_);
          global_step_ += response.steps();
        }
        if (response.end_of_data() || response.steps() == 0) break;
      }
      return absl::OkStatus();
    });
  }
  PS_RETURN_IF_ERROR(RunConcurrently(runs));
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t samples = 0;
  for (const RunStepsResponse& t : totals) {
    loss_sum += t.loss_sum();
    correct += t.correct();
    samples += t.samples();
  }
  if (samples == 0) return absl::FailedPreconditionError("an epoch trained on no examples");
  summary->loss = loss_sum / samples;
  summary->accuracy = static_cast<double>(correct) / samples;
  summary->samples = samples;
  return absl::OkStatus();
}

absl::Status Coordinator::Validate(EpochSummary* summary) {
  std::vector<VariablePlacementEntry> placement;
  {
    absl::MutexLock lock(&mu_);
    placement = placement_;
  }
  std::vector<VariableShape> shapes;
  for (const VariableSpec& spec : model_->trainable_variables()) {
    shapes.push_back({spec.name, spec.shape});
  }
  PS_ASSIGN_OR_RETURN(std::vector<VariableLayout> layout,
                      ResolveLayout(shapes, placement, static_cast<int>(ps_.size())));
  // Reassemble each variable: a whole one is taken as pulled, a split one gets each
  // shard's rows written into a full-size tensor.
  std::vector<Tensor> weights(layout.size());
  for (size_t i = 0; i < layout.size(); ++i) {
    if (!layout[i].whole()) weights[i] = Tensor(layout[i].shape);
  }
  for (size_t p = 0; p < ps_.size(); ++p) {
    std::vector<std::string> names;
    std::vector<std::pair<size_t, const VariablePlacementEntry*>> targets;
    for (size_t i = 0; i < layout.size(); ++i) {
      for (const VariablePlacementEntry& shard : layout[i].shards) {
        if (shard.ps_index() != static_cast<int>(p)) continue;
        names.push_back(shard.name());
        targets.push_back({i, &shard});
      }
    }
    if (names.empty()) continue;
    PS_ASSIGN_OR_RETURN(std::vector<Tensor> values, ps_[p]->Pull(names));
    for (size_t k = 0; k < values.size(); ++k) {
      const size_t i = targets[k].first;
      if (layout[i].whole()) {
        weights[i] = std::move(values[k]);
      } else {
        PS_RETURN_IF_ERROR(CopyShardInto(values[k], *targets[k].second, &weights[i]));
      }
    }
  }
  constexpr int64_t kEvalBatch = 1000;
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t samples = 0;
  for (int64_t start = 0; start < validation_->num_examples(); start += kEvalBatch) {
    const int64_t count = std::min(kEvalBatch, validation_->num_examples() - start);
    PS_ASSIGN_OR_RETURN(Dataset slice, validation_->Slice(start, count));
    PS_ASSIGN_OR_RETURN(StepResult r, model_->Evaluate(weights, slice.x, slice.y));
    loss_sum += r.loss_sum;
    correct += r.correct;
    samples += r.samples;
  }
  if (samples > 0) {
    summary->has_validation = true;
    summary->val_loss = loss_sum / samples;
    summary->val_accuracy = static_cast<double>(correct) / samples;
  }
  return absl::OkStatus();
}

}  // namespace pstrain
