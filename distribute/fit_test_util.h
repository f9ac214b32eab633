#ifndef PSTRAIN_DISTRIBUTE_FIT_TEST_UTIL_H_
#define PSTRAIN_DISTRIBUTE_FIT_TEST_UTIL_H_

// Small jobs and data for strategy equivalence tests (testonly).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/data/dataset.h"
#include "common/model/job_spec.h"
#include "common/tensor.h"
#include "distribute/strategy.h"

namespace pstrain {

// 4 features -> Dense(16, relu) -> Dense(3, softmax), no dropout (so replicas and a single
// process see the same function), Adam, sparse categorical cross-entropy, seed 7.
JobSpec SmallJob(int batch_size, int epochs, bool shuffle);

// Three Gaussian blobs in 4 dimensions, labels 0..2.
std::shared_ptr<const Dataset> Blobs(int64_t n, uint64_t seed);

// Two replicas, run one after the other on the calling thread: a split-and-reduce path
// without threads.
class TwoReplicaStrategy : public Strategy {
 public:
  std::string name() const override { return "two_replicas_test"; }
  int num_replicas_in_sync() const override { return 2; }
  absl::Status Run(const std::function<absl::Status(int)>& step_fn) override {
    absl::Status first = step_fn(0);
    absl::Status second = step_fn(1);
    return first.ok() ? second : first;
  }
};

// Largest |a - b| over all weights; +inf when the shapes differ.
double MaxAbsDiff(const std::vector<Tensor>& a, const std::vector<Tensor>& b);

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_FIT_TEST_UTIL_H_
