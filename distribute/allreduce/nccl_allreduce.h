#ifndef PSTRAIN_DISTRIBUTE_ALLREDUCE_NCCL_ALLREDUCE_H_
#define PSTRAIN_DISTRIBUTE_ALLREDUCE_NCCL_ALLREDUCE_H_

// An NCCL all-reduce for multi_worker_mirrored when every worker runs on a CUDA device:
// one communicator over `num_ranks` processes, one CUDA device each, made from a unique id
// that rank 0 creates (NewUniqueId) and the other ranks receive (over the gRPC ring, as
// nccl_id_codec.h describes). AllReduceSum sums float host buffers: it packs the tensors of
// one call into one device buffer (fusion, as the ring's bucket), runs ncclAllReduce(ncclSum)
// on its own stream and copies the sums back.
//
// Nothing waits forever: the communicator is created non-blocking and polled with
// ncclCommGetAsyncError until `timeout`; each AllReduceSum polls its stream until `timeout`.
// On expiry (or any NCCL error) the communicator is aborted (ncclCommAbort) and every later
// call fails. Every CUDA/NCCL error is a one-line absl::Status naming the call, e.g.
// "ncclCommInitRankConfig: error 4 (invalid argument): ...". No exceptions.
//
// Built only under --config=cuda (BUILD: CUDA_ONLY). Thread-safety: one thread at a time.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

struct ncclComm;
struct CUstream_st;

namespace pstrain {

class NcclAllReduce {
 public:
  // ncclGetUniqueId on rank 0: kNcclUniqueIdBytes bytes. Errors: INTERNAL naming the call.
  static absl::StatusOr<std::vector<uint8_t>> NewUniqueId();

  // This process is rank `rank` of `num_ranks`, on CUDA device `device`.
  // Errors: INVALID_ARGUMENT for a rank outside 0..num_ranks-1, a negative device or an id
  // that is not kNcclUniqueIdBytes long; DEADLINE_EXCEEDED when the ranks have not all joined
  // within `timeout`; INTERNAL / FAILED_PRECONDITION naming the CUDA or NCCL call that failed.
  static absl::StatusOr<std::unique_ptr<NcclAllReduce>> Create(int rank, int num_ranks,
                                                               int device,
                                                               absl::Span<const uint8_t> unique_id,
                                                               absl::Duration timeout);

  ~NcclAllReduce();
  NcclAllReduce(const NcclAllReduce&) = delete;
  NcclAllReduce& operator=(const NcclAllReduce&) = delete;

  // Replaces every element of every tensor by its sum over all ranks. Every rank must call it
  // with the same element counts in the same order. Errors: DEADLINE_EXCEEDED after
  // `timeout`; INTERNAL naming the call; FAILED_PRECONDITION after an earlier failure.
  absl::Status AllReduceSum(absl::Span<const absl::Span<float>> tensors);

  void set_timeout(absl::Duration timeout) { timeout_ = timeout; }
  int rank() const { return rank_; }
  int size() const { return num_ranks_; }
  int device() const { return device_; }

 private:
  NcclAllReduce(int rank, int num_ranks, int device, absl::Duration timeout)
      : rank_(rank), num_ranks_(num_ranks), device_(device), timeout_(timeout) {}
  // Polls the communicator until it is no longer in progress; aborts it on error or expiry.
  absl::Status WaitComm(const char* call, absl::Time deadline);
  absl::Status Fail(absl::Status status);  // aborts the communicator, remembers `status`

  int rank_;
  int num_ranks_;
  int device_;
  absl::Duration timeout_;
  ncclComm* comm_ = nullptr;
  CUstream_st* stream_ = nullptr;
  float* device_buffer_ = nullptr;
  int64_t device_capacity_ = 0;  // floats
  absl::Status broken_;          // set by Fail: every later call returns it
};

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_ALLREDUCE_NCCL_ALLREDUCE_H_
