#ifndef PSTRAIN_COMMON_DATA_BATCHER_H_
#define PSTRAIN_COMMON_DATA_BATCHER_H_

// Batches over an in-memory Dataset, in the order of TF's
//   dataset.shuffle(buffer_size, seed).batch(batch_size, drop_remainder).repeat(epochs)
//       .prefetch(depth)
// so a batch never spans two epochs and each epoch is reshuffled (TF's
// reshuffle_each_iteration=True). The shuffle is TF's buffered shuffle: a buffer of
// buffer_size examples, each output drawn uniformly from it and its slot refilled with the
// next example; a buffer >= N gives a uniform permutation of the whole epoch. The order is
// deterministic from the seed (std::mt19937_64, hand-written distributions) but is not
// TF's own random stream.
//
// Each example is copied once, into its batch. With prefetch > 0 a background thread
// prepares up to that many batches ahead; the destructor stops and joins it.
//
// Thread safety: Next() must be called from one thread at a time (it is an iterator).

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/data/dataset.h"
#include "common/tensor.h"

namespace pstrain {

struct BatcherOptions {
  int64_t batch_size = 32;
  // Drop the last, short batch of each epoch (TF's drop_remainder).
  bool drop_remainder = false;
  // Shuffle buffer in examples: 0 = no shuffle, >= N = full permutation per epoch.
  int64_t shuffle_buffer = 0;
  uint64_t seed = 0;
  // Passes over the data; -1 repeats forever.
  int64_t epochs = 1;
  // Batches prepared ahead on a background thread; 0 = none (batches built inside Next()).
  int prefetch = 0;
};

struct Batch {
  Tensor x;           // [B, F]
  Tensor y;           // [B] or [B, K]
  int64_t epoch = 0;  // 0-based epoch this batch belongs to
  int64_t step = 0;   // 0-based batch number counted over all epochs
};

class Batcher {
 public:
  // Errors: InvalidArgument when the dataset does not validate, batch_size < 1,
  // shuffle_buffer < 0, epochs < -1 or 0, prefetch < 0, or drop_remainder leaves no batch
  // (N < batch_size) while epochs is -1 (which would never yield).
  static absl::StatusOr<std::unique_ptr<Batcher>> Create(std::shared_ptr<const Dataset> data,
                                                         const BatcherOptions& options);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // The next batch. Errors: OutOfRange "end of data" after the last epoch (again on every
  // later call), as TF's iterator does.
  absl::StatusOr<Batch> Next();

  // Batches one epoch yields.
  int64_t batches_per_epoch() const;

 private:
  Batcher(std::shared_ptr<const Dataset> data, const BatcherOptions& options);

  // Builds the next batch from the producer state below; OutOfRange at the end.
  absl::StatusOr<Batch> Produce();
  // Fills order_ with the next epoch's example order.
  void StartEpoch();
  void PrefetchLoop();

  const std::shared_ptr<const Dataset> data_;
  const BatcherOptions options_;

  // Producer state: touched only by the thread that builds batches (the prefetch thread
  // when prefetch > 0, else the caller of Next()).
  std::mt19937_64 engine_;
  std::vector<int64_t> order_;  // this epoch's example order
  int64_t position_ = 0;        // next index into order_
  int64_t epoch_ = -1;          // epoch of order_
  int64_t step_ = 0;
  bool finished_ = false;

  // State below is protected by mutex_ (prefetch only).
  absl::Mutex mutex_;
  absl::CondVar changed_;
  std::deque<absl::StatusOr<Batch>> ready_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread prefetcher_;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DATA_BATCHER_H_
