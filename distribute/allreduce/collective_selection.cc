#include "distribute/allreduce/collective_selection.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distribute/allreduce/nccl_id_codec.h"

#ifdef PSTRAIN_WITH_CUDA
#include "distribute/allreduce/nccl_allreduce.h"
#endif

namespace pstrain {
namespace {

#ifdef PSTRAIN_WITH_CUDA
class NcclCollective : public CrossWorkerCollective {
 public:
  explicit NcclCollective(std::unique_ptr<NcclAllReduce> nccl) : nccl_(std::move(nccl)) {}
  absl::Status AllReduceSum(absl::Span<const absl::Span<float>> tensors) override {
    return nccl_->AllReduceSum(tensors);
  }
  void set_timeout(absl::Duration timeout) override { nccl_->set_timeout(timeout); }

 private:
  std::unique_ptr<NcclAllReduce> nccl_;
};
#endif

}  // namespace

absl::StatusOr<CollectiveKind> ParseCollectiveKind(absl::string_view flag) {
  if (flag == "auto") return CollectiveKind::kAuto;
  if (flag == "ring") return CollectiveKind::kRing;
  if (flag == "nccl") return CollectiveKind::kNccl;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", flag, "\" is not one of auto, ring, nccl"));
}

bool NcclBuiltIn() {
#ifdef PSTRAIN_WITH_CUDA
  return true;
#else
  return false;
#endif
}

absl::StatusOr<CollectiveSelection> SelectCollective(const RingSum& ring_sum, int rank,
                                                     int num_ranks, CollectiveKind kind,
                                                     int cuda_device,
                                                     absl::Duration nccl_timeout) {
  if (kind == CollectiveKind::kNccl && !NcclBuiltIn()) {
    return absl::FailedPreconditionError(
        "--collective=nccl: this binary was built without CUDA (build it with "
        "bazel build --config=cuda); use --collective=auto or ring");
  }
  // Agreement: [ranks able to use NCCL, ranks asking for the ring, ranks asking for NCCL].
  const bool able = NcclBuiltIn() && cuda_device >= 0;
  std::vector<float> flags = {able && kind != CollectiveKind::kRing ? 1.0f : 0.0f,
                              kind == CollectiveKind::kRing ? 1.0f : 0.0f,
                              kind == CollectiveKind::kNccl ? 1.0f : 0.0f};
  absl::Status st = ring_sum({absl::MakeSpan(flags)});
  if (!st.ok()) return st;
  const int on_cuda = static_cast<int>(flags[0]);
  const int want_ring = static_cast<int>(flags[1]);
  const int want_nccl = static_cast<int>(flags[2]);
  CollectiveSelection selection;
  if (on_cuda != num_ranks || want_ring > 0) {
    std::string why;
    if (want_ring > 0) {
      why = absl::StrCat(want_ring, " of ", num_ranks, " workers asked for --collective=ring");
    } else {
      why = absl::StrCat(on_cuda, " of ", num_ranks,
                         " workers on a CUDA device in a CUDA build; NCCL needs all");
    }
    if (want_nccl > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--collective=nccl (asked by ", want_nccl, " of ", num_ranks,
          " workers) is not possible: ", why));
    }
    selection.description = absl::StrCat("collective: gRPC ring all-reduce (", why, ")");
    return selection;
  }
#ifdef PSTRAIN_WITH_CUDA
  // Rank 0 makes the id; the others add zeros. The last entry says rank 0 failed, so no rank
  // waits for a communicator that will never form.
  std::vector<float> message(kNcclUniqueIdBytes + 1, 0.0f);
  absl::Status id_status;
  if (rank == 0) {
    absl::StatusOr<std::vector<uint8_t>> id = NcclAllReduce::NewUniqueId();
    if (id.ok()) {
      const std::vector<float> encoded = EncodeNcclUniqueId(*id);
      std::copy(encoded.begin(), encoded.end(), message.begin());
    } else {
      id_status = id.status();
      message.back() = 1.0f;
    }
  }
  st = ring_sum({absl::MakeSpan(message)});
  if (!st.ok()) return st;
  if (!id_status.ok()) return id_status;
  if (message.back() != 0.0f) {
    return absl::InternalError("NCCL: rank 0 could not create the unique id (see its log)");
  }
  absl::StatusOr<std::vector<uint8_t>> id =
      DecodeNcclUniqueId(absl::MakeConstSpan(message).subspan(0, kNcclUniqueIdBytes));
  if (!id.ok()) return id.status();
  absl::StatusOr<std::unique_ptr<NcclAllReduce>> nccl =
      NcclAllReduce::Create(rank, num_ranks, cuda_device, *id, nccl_timeout);
  if (!nccl.ok()) return nccl.status();
  selection.nccl = std::make_unique<NcclCollective>(*std::move(nccl));
  selection.description = absl::StrCat("collective: NCCL all-reduce (all ", num_ranks,
                                       " workers on CUDA devices; this one on cuda:",
                                       cuda_device, ")");
  return selection;
#else
  (void)rank;
  (void)nccl_timeout;
  return absl::InternalError("NCCL chosen in a build without CUDA");  // unreachable: able
#endif
}

}  // namespace pstrain
