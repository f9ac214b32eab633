#include "common/data/batcher.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/data/synthetic.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {


}  // namespace

absl::StatusOr<std::unique_ptr<Batcher>> Batcher::Create(std::shared_ptr<const Dataset> data,
                                                         const BatcherOptions& options) {
  if (data == nullptr) return absl::InvalidArgumentError("batcher has no dataset");
  PS_RETURN_IF_ERROR(data->Validate());
  if (options.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch size must be >= 1, got ", options.batch_size));
  }
  if (options.shuffle_buffer < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shuffle buffer must be >= 0, got ", options.shuffle_buffer));
  }
  if (options.epochs < -1 || options.epochs == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("epochs must be >= 1 or -1 (forever), got ", options.epochs));
  }
  if (options.prefetch < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefetch must be >= 0, got ", options.prefetch));
  }
  std::unique_ptr<Batcher> batcher(new Batcher(std::move(data), options));
  if (options.epochs == -1 && batcher->batches_per_epoch() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "repeating forever over ", batcher->data_->num_examples(), " examples in batches of ",
        options.batch_size, options.drop_remainder ? " with drop_remainder" : "",
        " would never yield a batch"));
  }
  if (options.prefetch > 0) {
    batcher->prefetcher_ = std::thread([b = batcher.get()] { b->PrefetchLoop(); });
  }
  return batcher;
}

Batcher::Batcher(std::shared_ptr<const Dataset> data, const BatcherOptions& options)
    : data_(std::move(data)), options_(options), engine_(options.seed) {}

Batcher::~Batcher() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
    changed_.SignalAll();
  }
  if (prefetcher_.joinable()) prefetcher_.join();
}

int64_t Batcher::batches_per_epoch() const {
  const int64_t n = data_->num_examples();
  return options_.drop_remainder ? n / options_.batch_size
                                 : (n + options_.batch_size - 1) / options_.batch_size;
}

void Batcher::StartEpoch() {
  ++epoch_;
  position_ = 0;
  if (options_.epochs != -1 && epoch_ >= options_.epochs) {
    finished_ = true;
    return;
  }
  const int64_t n = data_->num_examples();
  order_.resize(n);
  if (options_.shuffle_buffer == 0) {
    for (int64_t i = 0; i < n; ++i) order_[i] = i;
    return;
  }
  // TF's buffered shuffle: draw uniformly from a window of the next buffer_size examples.
  std::vector<int64_t> buffer;
  buffer.reserve(std::min(options_.shuffle_buffer, n));
  int64_t next = 0;
  while (next < n && static_cast<int64_t>(buffer.size()) < options_.shuffle_buffer) {
    buffer.push_back(next++);
  }
  int64_t out = 0;
  while (!buffer.empty()) {
    const size_t j = UniformBelow(engine_, buffer.size());
    order_[out++] = buffer[j];
    if (next < n) {
      buffer[j] = next++;
    } else {
      buffer[j] = buffer.back();
      buffer.pop_back();
    }
  }
}

absl::StatusOr<Batch> Batcher::Produce() {
  const int64_t n = data_->num_examples();
  const int64_t b = options_.batch_size;
  while (!finished_) {
    const int64_t remaining = epoch_ < 0 ? 0 : n - position_;
    if (remaining == 0 || (options_.drop_remainder && remaining < b)) {
      StartEpoch();
      continue;
    }
    const int64_t count = std::min(b, remaining);
    const int64_t features = data_->num_features();
    const int64_t width = data_->label_width();
    Batch batch;
    batch.x = Tensor({count, features});
    batch.y = data_->sparse_labels() ? Tensor({count}) : Tensor({count, width});
    batch.epoch = epoch_;
    batch.step = step_++;
    const float* x = data_->x.data();
    const float* y = data_->y.data();
    if (options_.shuffle_buffer == 0) {
      // Rows in order: one contiguous copy each.
      std::memcpy(batch.x.data(), x + position_ * features, sizeof(float) * count * features);
      std::memcpy(batch.y.data(), y + position_ * width, sizeof(float) * count * width);
    } else {
      for (int64_t i = 0; i < count; ++i) {
        const int64_t row = order_[position_ + i];
        std::memcpy(batch.x.data() + i * features, x + row * features, sizeof(float) * features);
        std::memcpy(batch.y.data() + i * width, y + row * width, sizeof(float) * width);
      }
    }
    position_ += count;
    return batch;
  }
  return absl::OutOfRangeError("end of data");
}

void Batcher::PrefetchLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mutex_);
      while (!stopping_ && static_cast<int>(ready_.size()) >= options_.prefetch) {
        changed_.Wait(&mutex_);
      }
      if (stopping_) return;
    }
    // Built outside the lock: the consumer keeps taking ready batches meanwhile.
    absl::StatusOr<Batch> batch = Produce();
    const bool end = !batch.ok();
    {
      absl::MutexLock lock(&mutex_);
      ready_.push_back(std::move(batch));
      changed_.SignalAll();
    }
    if (end) return;
  }
}

absl::StatusOr<Batch> Batcher::Next() {
  if (options_.prefetch == 0) return Produce();
  absl::MutexLock lock(&mutex_);
  // The producer always ends with an error entry, so this wait ends.
  while (ready_.empty()) changed_.Wait(&mutex_);
  if (!ready_.front().ok()) return ready_.front().status();  // kept: end is sticky
  absl::StatusOr<Batch> batch = std::move(ready_.front());
  ready_.pop_front();
  changed_.SignalAll();
  return batch;
}

}  // namespace pstrain
