#ifndef PSTRAIN_PS_SERVER_CLIENT_PS_TRAINER_H_
#define PSTRAIN_PS_SERVER_CLIENT_PS_TRAINER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model.h"
#include "common/tensor.h"
#include "common/wire_precision.h"
#include "proto/chief.pb.h"
#include "common/sharding/shard_layout.h"
#include "common/sharding/shards_by_ps.h"
#include "ps_server/ps_client.h"
#include "ps_server/client/exchange_threads.h"
#include "ps_server/client/ps_trainer_metrics.h"
#include "ps_server/client/sparse_embedding.h"

namespace pstrain {

// One worker's side of parameter-server training, over PsClients (the worker daemon's
// TrainingWorker and a custom loop's workers, pstrain/internal/parameter_server_strategy.cc,
// share it): computes gradients on a batch with the weights it last pulled, and pushes them
// to the ps tasks that own each variable, getting the updated weights back in the same
// round trip (PushPull), one RPC per ps, all in flight at once, each on a long-lived
// thread of the trainer's own (ExchangeThreads: none is started per step). Asynchronous:
// other workers push in between, as in TensorFlow's ParameterServerStrategy. Not
// thread-safe: one trainer per worker thread.
//
// Overlap (SetOverlap, the job's "overlap": true): PushGradients starts the exchange and
// returns at once; the next step computes its gradients on the weights the previous
// exchange brought back while this one is in flight, and its PushGradients waits for this
// one first. The pulled values go to a second buffer, swapped in when the exchange ends.
// That is bounded staleness 1 from the worker's own pushes: each gradient (after the
// first) is computed on weights that miss the worker's own previous push, and each push
// carries the versions it was computed at, so the ps reports that lag
// (VariableStore::push_lag_max, pstrain_ps_push_lag). Off by default; never with sync
// consistency (the job spec refuses it: sync must stay exact). A row-sparse trainer
// ignores it (logged once): its batch's rows are pulled as the step computes.
//
// Partitioned variables (common/sharding/shard_layout.h): the gradient of a variable split into
// shards is sliced by rows, each shard's slice pushed to the ps that holds the shard
// (together with every other shard on that ps, in the same PushPull), and the pulled
// shards are written straight into the rows of the full weight tensor. An unsplit
// variable's gradient and value are moved, never copied. The rows of one variable may
// come from different ps at slightly different versions, as with TensorFlow's
// partitioned variables under asynchronous training.
//
// Row-sparse embeddings (EmbeddingTraffic::kRowSparse, ps_server/client/sparse_embedding.h):
// a model whose first layer is an Embedding never holds its table. Each step pulls the rows
// of the batch's distinct ids (PullRows), computes on a compact copy of the model, and
// pushes those rows' gradients (PushRows) next to the other variables' PushPull, to the
// same ps at once; the table is left out of PullAll, weights() holds the compact table.
// Sync mode too: the ps aggregates the rows (SetConsistency passes the mode on).
enum class EmbeddingTraffic {
  kDense,      // every variable whole, every step (a model trained densely, to compare)
  kRowSparse,  // the first layer's Embedding table by rows, when the model has one
};

class PsTrainer {
 public:
  // `model` and the clients are not owned. `placement` has one entry per shard (see
  // ResolveLayout), ps indices into `ps`.
  // Errors: INVALID_ARGUMENT a variable is missing from the placement, has another shape,
  //         its shards do not cover its rows exactly once, or a ps index is out of range.
  static absl::StatusOr<std::unique_ptr<PsTrainer>> Create(
      Model* model, std::vector<PsClient*> ps,
      const std::vector<VariablePlacementEntry>& placement, uint64_t dropout_seed,
      EmbeddingTraffic embedding_traffic = EmbeddingTraffic::kDense);

  // Whether this trainer moves an Embedding table by rows.
  bool row_sparse() const { return sparse_ != nullptr; }

  // Pulls every variable from its ps (after the exchange in flight, if any, ends).
  // Errors: those of PsClient::Pull, or of the exchange in flight (see Flush).
  absl::Status PullAll();

  // One training step on (x, y): ComputeGradients, then PushGradients.
  // Errors: INVALID_ARGUMENT shapes that do not fit the model; PsClient errors.
  absl::StatusOr<StepResult> Step(const Tensor& x, const Tensor& y);

  // The two halves of a step, for a loop that looks at the gradients in between (the
  // custom-loop API's ComputeGradients and ApplyGradients): the gradients of (x, y) with
  // the weights as last pulled (pulling first if nothing was) go to gradients(); then
  // PushGradients pushes gradients() to the ps tasks and takes the new weights back, and
  // the step counts. Errors: ComputeGradients as Step; PushGradients INVALID_ARGUMENT
  // gradients missing or of other shapes than the variables, PsClient errors (the next
  // step then pulls afresh). With overlap, PushGradients first waits for the previous
  // step's exchange, and its errors are that exchange's; this step's goes in flight.
  absl::StatusOr<StepResult> ComputeGradients(const Tensor& x, const Tensor& y);
  std::vector<Tensor>& gradients() { return gradients_; }
  absl::Status PushGradients();

  // Waits for the exchange in flight (overlap), so that every step PushGradients accepted
  // has been applied by the ps tasks or failed: a worker calls it before it reports the
  // steps it ran. OK at once without overlap or with nothing in flight.
  // Errors: the exchange's (PsClient errors; the next step then pulls afresh).
  absl::Status Flush();

  // Whether PushGradients overlaps the exchange with the next step's computation (see the
  // class comment). Ignored, with a warning logged once, by a row-sparse trainer. Call
  // before the first Step.
  void SetOverlap(bool overlap);
  bool overlap() const { return overlap_; }

  // The weights as last pulled, full tensors in variables() order.
  const std::vector<Tensor>& weights() const { return weights_; }

  int64_t steps_done() const { return steps_done_; }

  // Who pushes and whether each push carries the versions its gradients were computed at
  // (sync mode needs them; the others only record the lag, as with overlap, which sends
  // them whatever this says). A row-sparse table then moves
  // as sync mode needs it (SparseEmbedding::SetSyncMode). Call before the first Step.
  void SetConsistency(std::string worker, bool send_versions) {
    worker_ = std::move(worker);
    send_versions_ = send_versions;
    if (sparse_ != nullptr) sparse_->SetSyncMode(send_versions);
  }

  // The epoch and the step within it that the next Step pushes as (bounded staleness
  // compares workers by them). Without a call, pushes count steps_done() in epoch 0.
  void SetPosition(int32_t epoch, int64_t step) {
    epoch_ = epoch;
    position_ = step;
    has_position_ = true;
  }

  // How the dense gradients and the values pulled back with them travel (the job's
  // "wire_dtype"). In bfloat16 or float16 each gradient is rounded with error feedback
  // (common/wire_precision.h: what a push rounds away goes with the next push of the
  // same shard) and the values come back rounded; the ps keeps float32. Row pushes and
  // the whole pulls (PullAll) stay float32. Call before the first Step.
  void SetWirePrecision(WirePrecision precision) { precision_ = precision; }

  // Where each step's phases are timed (not owned; null: nowhere; the worker daemon's
  // WorkerMetrics). Call before Step.
  void SetMetrics(PsTrainerMetrics* metrics) { metrics_ = metrics; }

  // The version of each shard as last pulled, in by-ps order: versions_by_ps()[p][k] is
  // that of the k-th shard ps p holds.
  const std::vector<std::vector<int64_t>>& versions_by_ps() const { return versions_by_ps_; }

 private:
  PsTrainer(Model* model, std::vector<PsClient*> ps, std::vector<VariableLayout> layout,
            uint64_t dropout_seed, std::unique_ptr<SparseEmbedding> sparse);
  // One ps's part of PushGradients: the PushPull of its dense shards (exchange_gradients_,
  // with exchange_context_), the values into exchange_weights_ and exchange_versions_, and
  // the PushRows of the table rows it owns.
  absl::Status ExchangeWith(size_t p);

  // Puts the values pulled from ps `p` (in by_ps_[p] order) into `weights` and `versions`.
  // Called from one thread per ps at once: whole variables are owned by one ps, and split
  // ones are preallocated, so each thread writes only its own tensors or rows.
  absl::Status StorePulled(size_t p, std::vector<Tensor> values, std::vector<int64_t> versions,
                           std::vector<Tensor>* weights,
                           std::vector<std::vector<int64_t>>* versions_by_ps);

  // Ends the exchange in flight: on success its values become weights_ and the step
  // counts; on error the next step pulls afresh. OK with nothing in flight.
  absl::Status FinishExchange();
  // The same, with the exchange's status already known (it ran on this thread's watch).
  absl::Status FinishExchange(absl::Status exchanged);
  // Sizes `weights` for the model and preallocates its split variables' full tensors.
  void AllocateSplit(std::vector<Tensor>* weights) const;

  PsTrainerMetrics* metrics_ = nullptr;  // Not owned; may be null.

  Model* const model_;                 // Not owned.
  const std::vector<PsClient*> ps_;    // Not owned.
  const std::vector<VariableLayout> layout_;  // per trainable variable, in model order
  // The row-sparse table (variable 0), or null; its shards are not in by_ps_.
  std::unique_ptr<SparseEmbedding> sparse_;
  // The model the last ComputeGradients ran (model_, or the sparse table's compact copy).
  Model* step_model_;  // Not owned.
  // by_ps_[p]: the shards ps p holds, in the order they are pulled and pushed;
  // names_by_ps_[p]: their names, in that order.
  std::vector<std::vector<ShardRef>> by_ps_;
  std::vector<std::vector<std::string>> names_by_ps_;
  // versions_by_ps_[p]: the version of each of ps p's shards as last pulled.
  std::vector<std::vector<int64_t>> versions_by_ps_;
  std::string worker_;
  bool send_versions_ = false;
  WirePrecision precision_ = WirePrecision::kFloat32;
  // feedback_by_ps_[p]: the rounding residuals of ps p's shards (slot k: by_ps_[p][k]),
  // touched only by the thread exchanging with ps p.
  std::vector<ErrorFeedback> feedback_by_ps_;
  int32_t epoch_ = 0;
  int64_t position_ = 0;
  bool has_position_ = false;
  std::vector<Tensor> weights_;
  std::vector<Tensor> gradients_;
  bool have_weights_ = false;
  uint64_t dropout_seed_;
  int64_t steps_done_ = 0;
  // The last ComputeGradients' timing and samples, recorded when its push is done.
  int64_t compute_start_ = 0;
  int64_t compute_end_ = 0;
  int64_t computed_samples_ = 0;
  // versions_by_ps_ as the last ComputeGradients found them (what its push carries: with
  // overlap, the exchange that ends before that push replaces versions_by_ps_).
  std::vector<std::vector<int64_t>> computed_versions_by_ps_;

  bool overlap_ = false;
  // What the exchange (in flight, with overlap) works on, touched by its threads only
  // while it runs, by this trainer's thread otherwise: the gradients it pushes, the
  // context (the versions sent to each ps aside), and where the pulled values and
  // versions go: weights_ and versions_by_ps_ without overlap; with it, the second
  // buffers, swapped with those when it ends (empty until SetOverlap(true)).
  std::vector<Tensor> exchange_gradients_;
  PushContext exchange_context_;
  std::vector<std::vector<int64_t>> exchange_sent_versions_;
  std::vector<Tensor> exchange_weights_;
  std::vector<std::vector<int64_t>> exchange_versions_;
  std::vector<Tensor>* exchange_weights_into_ = &weights_;
  std::vector<std::vector<int64_t>>* exchange_versions_into_ = &versions_by_ps_;
  bool exchange_in_flight_ = false;
  // The step in flight's figures, for the metrics when it ends.
  int64_t exchange_start_ = 0;
  int64_t exchange_compute_ns_ = 0;
  int64_t exchange_samples_ = 0;
  // Last: destroyed first, so an exchange in flight ends before the buffers it writes go.
  std::unique_ptr<ExchangeThreads> threads_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_CLIENT_PS_TRAINER_H_
