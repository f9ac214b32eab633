#ifndef PSTRAIN_DISTRIBUTE_DISTRIBUTED_DATASET_H_
#define PSTRAIN_DISTRIBUTE_DISTRIBUTED_DATASET_H_

// tf.distribute's experimental_distribute_dataset: global batches of a Dataset, each split
// evenly across the replicas that step together, so that every replica gets its slice of
// the same global batch. The public API's ExperimentalDistributeDataset
// (pstrain/strategy.h) makes it, for a custom loop and for Fit (pstrain/fit.h) alike.
//
// A strategy whose replicas live in several processes (multi_worker_mirrored) builds the
// same global batch in every process (same data, same seed) and keeps only its own
// replicas' slices, so the processes need not talk to agree on the data.
//
// Thread-safety: a DistributedDataset is immutable and may make iterators from any thread;
// an iterator is used by one thread at a time.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/batcher.h"
#include "common/data/dataset.h"
#include "common/tensor.h"

namespace pstrain {

// One replica's share of a global batch.
struct ReplicaBatch {
  Tensor x;  // [rows, features...]
  Tensor y;  // [rows] class ids, or [rows, K]
  // Rows of the whole global batch (every replica's, in every process): a replica's
  // gradient of its slice's mean loss counts rows / global_batch_size in the update.
  int64_t global_batch_size = 0;
  int64_t rows() const { return x.shape().empty() ? 0 : x.shape()[0]; }
};

// One global batch, as this process sees it: the slices of its replicas
// [first_replica, first_replica + replicas.size()). With one replica in all the slice is
// the global batch itself (moved, never copied).
struct DistributedBatch {
  int first_replica = 0;
  std::vector<ReplicaBatch> replicas;
  int64_t global_batch_size = 0;
  int64_t epoch = 0;  // 0-based pass over the data this batch belongs to
  int64_t step = 0;   // 0-based batch number over the iterator's life
};

// Rows [rows * r / R, rows * (r + 1) / R) of `batch` for each local replica r in
// [first_local, first_local + num_local) of `num_replicas` R: an even split, the remainder
// spread one row at a time, so a short last batch may leave a replica no rows.
DistributedBatch SplitGlobalBatch(Batch batch, int num_replicas, int first_local, int num_local);

// The per-replica slices of a stream of global batches.
class DistributedIterator {
 public:
  // `batcher` yields global batches. Replicas as SplitGlobalBatch takes them.
  DistributedIterator(std::unique_ptr<Batcher> batcher, int num_replicas, int first_local,
                      int num_local);

  // The next global batch, split. Errors: OUT_OF_RANGE "end of data" after the last one
  // (and on every later call), as TensorFlow's iterator does; the Batcher's.
  absl::StatusOr<DistributedBatch> Next();

  // Global batches one pass over the data yields.
  int64_t batches_per_epoch() const { return batcher_->batches_per_epoch(); }

 private:
  const std::unique_ptr<Batcher> batcher_;
  const int num_replicas_;
  const int first_local_;
  const int num_local_;
};

// How a DistributedDataset batches, as tf.data's
// dataset.shuffle(...).batch(global_batch_size).repeat(...).prefetch(...).
struct DistributedDatasetOptions {
  // Rows of one global batch (split across the replicas). Must be >= 1.
  int64_t global_batch_size = 32;
  // Reshuffle every pass (a full-data shuffle buffer), with a seed derived from
  // (seed, epoch): the same order in every process and every run.
  bool shuffle = true;
  uint64_t seed = 0;
  // Passes each iterator makes; -1 repeats forever (an epoch then is what the caller
  // says it is, e.g. Keras's steps_per_epoch).
  int64_t repeat = 1;
  // Drop each pass's last, short batch.
  bool drop_remainder = false;
  // Global batches prepared ahead on a background thread.
  int prefetch = 2;
};

class DistributedDataset {
 public:
  // `num_replicas` replicas step together; this process runs
  // [first_local, first_local + num_local).
  // Errors: INVALID_ARGUMENT null data, global_batch_size < 1, repeat 0 or
  // < -1, prefetch < 0, replicas that do not fit (num_replicas < 1, the local range
  // outside [0, num_replicas)).
  static absl::StatusOr<std::unique_ptr<DistributedDataset>> Create(
      std::shared_ptr<const Dataset> data, const DistributedDatasetOptions& options,
      int num_replicas, int first_local, int num_local);

  // An iterator over pass `epoch` (0-based; it picks the shuffle), or over passes epoch,
  // epoch + 1, ... when options.repeat says so. Errors: the Batcher's (INVALID_ARGUMENT
  // data that does not validate).
  absl::StatusOr<std::unique_ptr<DistributedIterator>> MakeIterator(int64_t epoch) const;

  // The shuffle seed of pass `epoch` (what MakeIterator gives the Batcher).
  uint64_t EpochSeed(int64_t epoch) const;

  const Dataset& data() const { return *data_; }
  const DistributedDatasetOptions& options() const { return options_; }

 private:
  DistributedDataset(std::shared_ptr<const Dataset> data, const DistributedDatasetOptions& options,
                     int num_replicas, int first_local, int num_local);

  const std::shared_ptr<const Dataset> data_;
  const DistributedDatasetOptions options_;
  const int num_replicas_;
  const int first_local_;
  const int num_local_;
};

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_DISTRIBUTED_DATASET_H_
