#include "worker/training_worker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/data/data_spec.h"
#include "common/memory_budget.h"
#include "common/model/model_memory.h"
#include "common/status_macros.h"
#include "distribute/failure.h"
#include "nlohmann/json.hpp"

namespace pstrain {

absl::StatusOr<std::unique_ptr<TrainingWorker>> TrainingWorker::Create(
    const std::string& job_json, const std::string& base_dir, int worker_index, std::unique_ptr<Backend> backend,
    PsClientFactory make_ps_client) {
  PS_ASSIGN_OR_RETURN(JobSpec job, ParseJobSpec(job_json, base_dir));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::FromKerasJson(job.model, backend.get()));
  PS_RETURN_IF_ERROR(model->SetLoss(job.loss));
  if (!job.data->is_object() || !job.data->contains("train")) {
    return absl::InvalidArgumentError("job spec: data.train is missing");
  }
  const bool sync = job.consistency.mode() == CONSISTENCY_SYNC;
  // Before the data or anything of the model is allocated: the pulled weights, the
  // gradients, their copy on the wire, and a batch's activations; of an Embedding trained
  // by rows, only a batch's rows.
  ModelMemoryUse use;
  use.copies_per_variable = 3;
  use.copies_are = "pulled values, gradients and their copy on the wire";
  if (job.overlap) {
    // The exchange in flight has its own gradients and values beside the step's.
    use.copies_per_variable = 5;
    use.copies_are = "pulled values and gradients twice (overlap), their copy on the wire";
  }
  use.batch = job.batch_size;
  if (HasRowSparseEmbedding(*model)) {
    use.first_layer_rows_held = SaturatingMul(job.batch_size, model->input_size());
    use.copies_are += "; of the Embedding, a batch's rows";
  }
  PS_RETURN_IF_ERROR(CheckModelMemory(*model, use, absl::StrCat("worker ", worker_index)));
  PS_ASSIGN_OR_RETURN(Dataset train, LoadJobDataset((*job.data)["train"], base_dir, "data.train",
                                                    job.one_hot_labels));
  if (train.num_features() != model->input_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training data has ", train.num_features(), " features per example but the model takes ",
        model->input_size()));
  }
  // A bad label is named in file order now, not at its batch in shuffled order.
  if (job.loss.kind == LossConfig::Kind::kSparseCategoricalCrossentropy && train.sparse_labels() &&
      model->output_size() > 1) {
    if (absl::Status ids = train.CheckClassIds(model->output_size()); !ids.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("data.train: ", ids.message()));
    }
  }
  return std::unique_ptr<TrainingWorker>(new TrainingWorker(
      std::move(job), sync, worker_index, std::move(backend), std::move(model),
      std::make_shared<const Dataset>(std::move(train)), std::move(make_ps_client)));
}

TrainingWorker::TrainingWorker(JobSpec job, bool sync, int worker_index, std::unique_ptr<Backend> backend,
                               std::unique_ptr<Model> model, std::shared_ptr<const Dataset> train,
                               PsClientFactory make_ps_client)
    : job_(std::move(job)),
      sync_(sync),
      worker_index_(worker_index),
      backend_(std::move(backend)),
      make_ps_client_(std::move(make_ps_client)),
      model_(std::move(model)),
      train_(std::move(train)) {}

absl::Status TrainingWorker::PrepareTrainer(const RunStepsRequest& request) {
  std::vector<std::string> addresses(request.ps_addresses().begin(), request.ps_addresses().end());
  if (addresses.empty()) return absl::InvalidArgumentError("RunSteps names no ps task");
  if (addresses != ps_addresses_) {
    trainer_.reset();
    ps_clients_.clear();
    for (size_t i = 0; i < addresses.size(); ++i) {
      ps_clients_.push_back(make_ps_client_(static_cast<int>(i), addresses[i]));
    }
    ps_addresses_ = addresses;
  }
  std::string key;
  for (const VariablePlacementEntry& e : request.placement()) {
    absl::StrAppend(&key, e.name(), "@", e.ps_index(), ":", e.row_offset(), "+", e.num_rows(),
                    ";");
  }
  absl::StrAppend(&key, "generation ", request.ps_generation());
  if (trainer_ != nullptr && key == placement_key_) return absl::OkStatus();
  std::vector<PsClient*> clients;
  for (auto& c : ps_clients_) clients.push_back(c.get());
  const std::vector<VariablePlacementEntry> placement(request.placement().begin(),
                                                      request.placement().end());
  // An Embedding table moves by rows, in every consistency mode
  // (ps_server/client/sparse_embedding.h).
  PS_ASSIGN_OR_RETURN(
      trainer_, PsTrainer::Create(model_.get(), std::move(clients), placement,
                                  job_.seed * 7919 + 104729 * (worker_index_ + 1),
                                  EmbeddingTraffic::kRowSparse));
  trainer_->SetConsistency(absl::StrCat("worker ", worker_index_), sync_);
  trainer_->SetWirePrecision(job_.wire_precision);
  trainer_->SetOverlap(job_.overlap);
  trainer_->SetMetrics(metrics_);
  placement_key_ = key;
  return absl::OkStatus();
}

absl::Status TrainingWorker::PrepareBatcher(const RunStepsRequest& request) {
  if (request.num_shards() < 1 || request.shard_index() < 0 ||
      request.shard_index() >= request.num_shards()) {
    return absl::InvalidArgumentError(absl::StrCat("shard ", request.shard_index(), " of ",
                                                   request.num_shards(), " does not exist"));
  }
  if (request.batch_size() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("batch size ", request.batch_size(), " < 1"));
  }
  if (request.first_step() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("first step ", request.first_step(), " < 0"));
  }
  if (request.epoch() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("epoch ", request.epoch(), " < 0"));
  }
  const std::string key = absl::StrCat(request.epoch(), "/", request.shard_index(), "/",
                                       request.num_shards(), "/", request.batch_size());
  if (batcher_ != nullptr && key == batcher_key_ && batcher_position_ == request.first_step()) {
    return absl::OkStatus();
  }
  const std::pair<int64_t, int64_t> shard_key = {request.shard_index(), request.num_shards()};
  if (shard_ == nullptr || shard_key_ != shard_key) {
    // One copy of a shard at a time: the old batcher holds the old one.
    batcher_.reset();
    shard_.reset();
    PS_ASSIGN_OR_RETURN(Dataset shard,
                        train_->Shard(request.num_shards(), request.shard_index()));
    if (shard.num_examples() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard ", request.shard_index(), " of ", request.num_shards(), " holds no examples"));
    }
    shard_ = std::make_shared<const Dataset>(std::move(shard));
    shard_key_ = shard_key;
  }
  BatcherOptions options;
  options.batch_size = request.batch_size();
  options.shuffle_buffer = job_.shuffle ? shard_->num_examples() : 0;
  // Every (epoch, shard) has its own order, the same on whichever worker runs it.
  options.seed = job_.seed * 1000003 + request.epoch() * 8191 + request.shard_index();
  // With steps_per_epoch the data repeats, as Keras does with a repeated tf.data dataset.
  options.epochs = job_.steps_per_epoch > 0 ? -1 : 1;
  options.prefetch = 2;
  PS_ASSIGN_OR_RETURN(batcher_, Batcher::Create(shard_, options));
  batcher_key_ = key;
  batcher_position_ = 0;
  // A reassigned or repeated range starts part-way in: skip to it.
  while (batcher_position_ < request.first_step()) {
    absl::StatusOr<Batch> skipped = batcher_->Next();
    if (!skipped.ok()) break;
    ++batcher_position_;
  }
  return absl::OkStatus();
}


// A step fails on a ps when the ps is gone or came back empty (a restarted ps holds no
// variables until the chief restores them). The chief must tell that apart from this
// worker being unreachable, which is also UNAVAILABLE to it, so a ps failure travels as
// ABORTED (distribute/failure.h, the rule the custom loop's workers follow too). The
// trainer is dropped: the next chunk pulls fresh weights from the recovered ps.
absl::Status TrainingWorker::AsPsFailure(const absl::Status& status) {
  trainer_.reset();
  return distribute::PsFailureOnWorker(status);
}

absl::StatusOr<RunStepsResponse> TrainingWorker::RunSteps(const RunStepsRequest& request) {
  if (!mu_.TryLock()) {
    return absl::FailedPreconditionError("worker is already running steps");
  }
  busy_ = true;
  absl::StatusOr<RunStepsResponse> result = [&]() -> absl::StatusOr<RunStepsResponse> {
    mu_.AssertHeld();
    if (request.steps() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("steps ", request.steps(), " < 0"));
    }
    PS_RETURN_IF_ERROR(PrepareBatcher(request));
    PS_RETURN_IF_ERROR(PrepareTrainer(request));
    RunStepsResponse response;
    for (int64_t i = 0; i < request.steps(); ++i) {
      absl::StatusOr<Batch> batch = batcher_->Next();
      if (absl::IsOutOfRange(batch.status())) {
        response.set_end_of_data(true);
        break;
      }
      if (!batch.ok()) {
        (void)trainer_->Flush();  // the chunk fails anyway; no exchange left in flight
        return batch.status();
      }
      trainer_->SetPosition(request.epoch(), batcher_position_);
      ++batcher_position_;
      absl::StatusOr<StepResult> step = trainer_->Step(batch->x, batch->y);
      if (!step.ok()) return AsPsFailure(step.status());
      response.set_loss_sum(response.loss_sum() + step->loss_sum);
      response.set_correct(response.correct() + step->correct);
      response.set_samples(response.samples() + step->samples);
      response.set_steps(response.steps() + 1);
      ++steps_done_;
      if (step_delay_ > absl::ZeroDuration()) absl::SleepFor(step_delay_);
    }
    // Exactly once: with overlap the last step's exchange is still in flight, and every
    // step this chunk reports must have been applied (or the chunk fails, as a step would).
    if (absl::Status flushed = trainer_->Flush(); !flushed.ok()) return AsPsFailure(flushed);
    return response;
  }();
  busy_ = false;
  mu_.Unlock();
  return result;
}

absl::StatusOr<std::string> TrainingWorker::RunChunk(const std::string& arguments) {
  RunStepsRequest request;
  if (!request.ParseFromString(arguments)) {
    return absl::InvalidArgumentError(
        "the arguments of pstrain.train_chunk are not a RunStepsRequest");
  }
  absl::StatusOr<RunStepsResponse> response = RunSteps(request);
  if (!response.ok()) return response.status();
  return response->SerializeAsString();
}

WorkerStatusResponse TrainingWorker::GetStatus() const {
  WorkerStatusResponse status;
  status.set_steps_done(steps_done_.load());
  status.set_busy(busy_.load());
  status.set_backend(backend_->name());
  return status;
}

absl::Status RegisterTrainChunk(TrainingWorker* worker, WorkerFunctions* functions) {
  functions->SetStatusSource([worker](FunctionWorkerStatusResponse* status) {
    const WorkerStatusResponse state = worker->GetStatus();
    status->set_busy(state.busy());
    status->set_steps_done(state.steps_done());
    status->set_backend(state.backend());
  });
  return functions->Register(kTrainChunkFunction, [worker](const std::string& arguments) {
    return worker->RunChunk(arguments);
  });
}

}  // namespace pstrain
