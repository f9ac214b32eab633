#include "distribute/distributed_dataset.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// Rows [start, start + count) of a row-major tensor whose first dimension is the batch.
Tensor Rows(const Tensor& t, int64_t start, int64_t count) {
  std::vector<int64_t> shape = t.shape();
  const int64_t width = shape[0] == 0 ? 0 : t.num_elements() / shape[0];
  shape[0] = count;
  Tensor out(std::move(shape));
  std::memcpy(out.data(), t.data() + start * width, sizeof(float) * count * width);
  return out;
}

}  // namespace

DistributedBatch SplitGlobalBatch(Batch batch, int num_replicas, int first_local, int num_local) {
  DistributedBatch out;
  out.first_replica = first_local;
  out.epoch = batch.epoch;
  out.step = batch.step;
  const int64_t rows = batch.x.shape().empty() ? 0 : batch.x.shape()[0];
  out.global_batch_size = rows;
  out.replicas.resize(num_local);
  if (num_replicas == 1) {
    out.replicas[0].x = std::move(batch.x);
    out.replicas[0].y = std::move(batch.y);
    out.replicas[0].global_batch_size = rows;
    return out;
  }
  for (int i = 0; i < num_local; ++i) {
    const int64_t r = first_local + i;
    const int64_t begin = rows * r / num_replicas;
    const int64_t end = rows * (r + 1) / num_replicas;
    out.replicas[i].x = Rows(batch.x, begin, end - begin);
    out.replicas[i].y = Rows(batch.y, begin, end - begin);
    out.replicas[i].global_batch_size = rows;
  }
  return out;
}

DistributedIterator::DistributedIterator(std::unique_ptr<Batcher> batcher, int num_replicas,
                                         int first_local, int num_local)
    : batcher_(std::move(batcher)),
      num_replicas_(num_replicas),
      first_local_(first_local),
      num_local_(num_local) {}

absl::StatusOr<DistributedBatch> DistributedIterator::Next() {
  PS_ASSIGN_OR_RETURN(Batch batch, batcher_->Next());
  return SplitGlobalBatch(std::move(batch), num_replicas_, first_local_, num_local_);
}

absl::StatusOr<std::unique_ptr<DistributedDataset>> DistributedDataset::Create(
    std::shared_ptr<const Dataset> data, const DistributedDatasetOptions& options,
    int num_replicas, int first_local, int num_local) {
  if (data == nullptr) return absl::InvalidArgumentError("distribute dataset: no data");
  if (options.global_batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("distribute dataset: global_batch_size ",
                                                   options.global_batch_size, " < 1"));
  }
  if (options.repeat == 0 || options.repeat < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "distribute dataset: repeat ", options.repeat, " (passes >= 1, or -1 for forever)"));
  }
  if (options.prefetch < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("distribute dataset: prefetch ", options.prefetch, " < 0"));
  }
  if (num_replicas < 1 || num_local < 1 || first_local < 0 ||
      first_local + num_local > num_replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("distribute dataset: replicas [", first_local, ", ", first_local + num_local,
                     ") of ", num_replicas));
  }
  return std::unique_ptr<DistributedDataset>(
      new DistributedDataset(std::move(data), options, num_replicas, first_local, num_local));
}

DistributedDataset::DistributedDataset(std::shared_ptr<const Dataset> data,
                                       const DistributedDatasetOptions& options, int num_replicas,
                                       int first_local, int num_local)
    : data_(std::move(data)),
      options_(options),
      num_replicas_(num_replicas),
      first_local_(first_local),
      num_local_(num_local) {}

uint64_t DistributedDataset::EpochSeed(int64_t epoch) const {
  // The same per-epoch seed as the ps-mode worker's shard 0 uses.
  return options_.seed * 1000003 + static_cast<uint64_t>(epoch) * 8191;
}

absl::StatusOr<std::unique_ptr<DistributedIterator>> DistributedDataset::MakeIterator(
    int64_t epoch) const {
  BatcherOptions bo;
  bo.batch_size = options_.global_batch_size;
  bo.drop_remainder = options_.drop_remainder;
  bo.shuffle_buffer = options_.shuffle ? data_->num_examples() : 0;
  bo.seed = EpochSeed(epoch);
  bo.epochs = options_.repeat;
  bo.prefetch = options_.prefetch;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Batcher> batcher, Batcher::Create(data_, bo));
  return std::make_unique<DistributedIterator>(std::move(batcher), num_replicas_, first_local_,
                                               num_local_);
}

}  // namespace pstrain
