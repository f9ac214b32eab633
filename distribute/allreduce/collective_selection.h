#ifndef PSTRAIN_DISTRIBUTE_ALLREDUCE_COLLECTIVE_SELECTION_H_
#define PSTRAIN_DISTRIBUTE_ALLREDUCE_COLLECTIVE_SELECTION_H_

// Which all-reduce multi_worker_mirrored uses: the gRPC ring (always available) or NCCL
// (nccl_allreduce.h), chosen by all ranks together. NCCL is used only when this binary was
// built with CUDA (--config=cuda) and EVERY rank runs on a CUDA device; the ranks learn that
// with one small ring all-reduce of flags, so they cannot disagree. Rank 0 then makes the
// NCCL unique id and sends it through the ring (nccl_id_codec.h).
//
// This library builds with and without CUDA: only under --config=cuda does it link NCCL.
//
// Thread-safety: SelectCollective runs on the training-loop thread, before training.

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace pstrain {

// An all-reduce that replaces the ring (same contract as RingAllReduce::AllReduceSum).
class CrossWorkerCollective {
 public:
  virtual ~CrossWorkerCollective() = default;
  virtual absl::Status AllReduceSum(absl::Span<const absl::Span<float>> tensors) = 0;
  virtual void set_timeout(absl::Duration timeout) = 0;
};

enum class CollectiveKind { kAuto, kRing, kNccl };

// "auto", "ring" or "nccl". Errors: INVALID_ARGUMENT for anything else.
absl::StatusOr<CollectiveKind> ParseCollectiveKind(absl::string_view flag);

// True when this binary was built with --config=cuda (NCCL linked in).
bool NcclBuiltIn();

struct CollectiveSelection {
  // Null: the gRPC ring. Else the NCCL communicator, ready to use.
  std::unique_ptr<CrossWorkerCollective> nccl;
  // One line for the log, e.g. "collective: NCCL (all 2 workers on CUDA devices)" or
  // "collective: gRPC ring (1 of 2 workers on a CUDA device)".
  std::string description;
};

// The all-reduce of the ring, used for the agreement and the id exchange.
using RingSum = std::function<absl::Status(absl::Span<const absl::Span<float>>)>;

// Runs on every rank with the same `num_ranks`. `cuda_device` is this rank's CUDA device
// ordinal, or -1 when it trains on the CPU. `nccl_timeout` bounds the communicator's
// creation and, later, each NCCL all-reduce.
// Errors: FAILED_PRECONDITION when `kind` is kNccl and NCCL cannot be used (this binary was
// built without CUDA: at once, without the ring; or some rank is not on a CUDA device or
// asked for the ring: on every rank, after the agreement); the ring's errors;
// NCCL's (NcclAllReduce::Create) when the communicator cannot be made.
absl::StatusOr<CollectiveSelection> SelectCollective(const RingSum& ring_sum, int rank,
                                                     int num_ranks, CollectiveKind kind,
                                                     int cuda_device,
                                                     absl::Duration nccl_timeout);

}  // namespace pstrain

#endif  // PSTRAIN_DISTRIBUTE_ALLREDUCE_COLLECTIVE_SELECTION_H_
