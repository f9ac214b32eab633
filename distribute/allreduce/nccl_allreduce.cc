#include "distribute/allreduce/nccl_allreduce.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "distribute/allreduce/nccl_id_codec.h"

namespace pstrain {
namespace {

static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes,
              "nccl_id_codec.h: kNcclUniqueIdBytes must be sizeof(ncclUniqueId)");

absl::Status CudaError(const char* call, cudaError_t e) {
  return absl::InternalError(absl::StrCat(call, ": error ", static_cast<int>(e), " (",
                                          cudaGetErrorName(e), ": ", cudaGetErrorString(e),
                                          ")"));
}

absl::Status NcclError(const char* call, ncclResult_t r, ncclComm_t comm) {
  std::string detail;
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') detail = absl::StrCat(": ", last);
  // One line: NCCL's last error may end with a newline.
  while (!detail.empty() && (detail.back() == '\n' || detail.back() == '\r')) detail.pop_back();
  for (char& c : detail) {
    if (c == '\n') c = ' ';
  }
  const std::string message =
      absl::StrCat(call, ": error ", static_cast<int>(r), " (", ncclGetErrorString(r), ")",
                   detail);
  return r == ncclInvalidArgument || r == ncclInvalidUsage ? absl::InvalidArgumentError(message)
                                                           : absl::InternalError(message);
}

void PollPause() { std::this_thread::sleep_for(std::chrono::microseconds(200)); }

}  // namespace

absl::StatusOr<std::vector<uint8_t>> NcclAllReduce::NewUniqueId() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return NcclError("ncclGetUniqueId", r, nullptr);
  std::vector<uint8_t> out(sizeof(id));
  std::memcpy(out.data(), &id, sizeof(id));
  return out;
}

absl::StatusOr<std::unique_ptr<NcclAllReduce>> NcclAllReduce::Create(
    int rank, int num_ranks, int device, absl::Span<const uint8_t> unique_id,
    absl::Duration timeout) {
  if (num_ranks < 1 || rank < 0 || rank >= num_ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL: rank ", rank, " is not one of 0..", num_ranks - 1));
  }
  if (device < 0) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL: CUDA device ", device, " is negative"));
  }
  if (unique_id.size() != sizeof(ncclUniqueId)) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL: unique id of ", unique_id.size(),
                                                   " bytes, expected ", sizeof(ncclUniqueId)));
  }
  const absl::Time deadline = absl::Now() + timeout;
  std::unique_ptr<NcclAllReduce> self(new NcclAllReduce(rank, num_ranks, device, timeout));
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) return CudaError("cudaSetDevice", e);
  e = cudaStreamCreateWithFlags(&self->stream_, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    self->stream_ = nullptr;
    return CudaError("cudaStreamCreateWithFlags", e);
  }
  ncclUniqueId id;
  std::memcpy(&id, unique_id.data(), sizeof(id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // returns at once; WaitComm polls with a deadline
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, num_ranks, id, rank, &config);
  self->comm_ = comm;
  if (r != ncclSuccess && r != ncclInProgress) {
    const absl::Status st = NcclError("ncclCommInitRankConfig", r, comm);
    return self->Fail(st);
  }
  const absl::Status st = self->WaitComm("ncclCommInitRankConfig", deadline);
  if (!st.ok()) return st;
  return self;
}

NcclAllReduce::~NcclAllReduce() {
  if (comm_ != nullptr) {
    if (broken_.ok()) {
      // A clean communicator: finalize (non-blocking, bounded) then destroy; abort if that
      // does not finish in time.
      ncclResult_t r = ncclCommFinalize(comm_);
      const absl::Time deadline = absl::Now() + absl::Seconds(10);
      ncclResult_t state = r;
      while (r == ncclSuccess || r == ncclInProgress) {
        if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess || state != ncclInProgress ||
            absl::Now() >= deadline) {
          break;
        }
        PollPause();
      }
      if (state == ncclSuccess) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
    } else {
      ncclCommAbort(comm_);
    }
  }
  if (device_buffer_ != nullptr) cudaFree(device_buffer_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status NcclAllReduce::Fail(absl::Status status) {
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
  broken_ = status;
  return status;
}

absl::Status NcclAllReduce::WaitComm(const char* call, absl::Time deadline) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) return Fail(NcclError("ncclCommGetAsyncError", r, comm_));
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) return Fail(NcclError(call, state, comm_));
    if (absl::Now() >= deadline) {
      return Fail(absl::DeadlineExceededError(absl::StrCat(
          call, ": not finished within ", absl::FormatDuration(timeout_), " (rank ", rank_,
          " of ", num_ranks_, "; a rank did not join or is stalled); communicator aborted")));
    }
    PollPause();
  }
}

absl::Status NcclAllReduce::AllReduceSum(absl::Span<const absl::Span<float>> tensors) {
  if (!broken_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("NCCL all-reduce unusable after an earlier error: ", broken_.message()));
  }
  int64_t total = 0;
  for (const absl::Span<float>& t : tensors) total += static_cast<int64_t>(t.size());
  if (total == 0) return absl::OkStatus();  // every rank has the same counts: nothing to do
  const absl::Time deadline = absl::Now() + timeout_;
  cudaError_t e = cudaSetDevice(device_);
  if (e != cudaSuccess) return Fail(CudaError("cudaSetDevice", e));
  if (total > device_capacity_) {
    if (device_buffer_ != nullptr) cudaFree(device_buffer_);
    device_buffer_ = nullptr;
    device_capacity_ = 0;
    void* p = nullptr;
    e = cudaMalloc(&p, static_cast<size_t>(total) * sizeof(float));
    if (e != cudaSuccess) return Fail(CudaError("cudaMalloc", e));
    device_buffer_ = static_cast<float*>(p);
    device_capacity_ = total;
  }
  // Fuse: every tensor into one device buffer, one collective, then back.
  int64_t offset = 0;
  for (const absl::Span<float>& t : tensors) {
    if (t.empty()) continue;
    e = cudaMemcpyAsync(device_buffer_ + offset, t.data(), t.size() * sizeof(float),
                        cudaMemcpyHostToDevice, stream_);
    if (e != cudaSuccess) return Fail(CudaError("cudaMemcpyAsync (to device)", e));
    offset += static_cast<int64_t>(t.size());
  }
  const ncclResult_t r = ncclAllReduce(device_buffer_, device_buffer_, static_cast<size_t>(total),
                                       ncclFloat32, ncclSum, comm_, stream_);
  if (r != ncclSuccess && r != ncclInProgress) return Fail(NcclError("ncclAllReduce", r, comm_));
  // A non-blocking communicator may still be enqueuing the collective.
  absl::Status st = WaitComm("ncclAllReduce", deadline);
  if (!st.ok()) return st;
  offset = 0;
  for (const absl::Span<float>& t : tensors) {
    if (t.empty()) continue;
    e = cudaMemcpyAsync(t.data(), device_buffer_ + offset, t.size() * sizeof(float),
                        cudaMemcpyDeviceToHost, stream_);
    if (e != cudaSuccess) return Fail(CudaError("cudaMemcpyAsync (to host)", e));
    offset += static_cast<int64_t>(t.size());
  }
  // Poll rather than cudaStreamSynchronize: a peer that never joins must not hang us.
  for (;;) {
    e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) return Fail(CudaError("cudaStreamQuery", e));
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess &&
        state != ncclInProgress) {
      return Fail(NcclError("ncclAllReduce", state, comm_));
    }
    if (absl::Now() >= deadline) {
      return Fail(absl::DeadlineExceededError(absl::StrCat(
          "ncclAllReduce: ", total, " floats not summed within ", absl::FormatDuration(timeout_),
          " (rank ", rank_, " of ", num_ranks_, "); communicator aborted")));
    }
    PollPause();
  }
  return absl::OkStatus();
}

}  // namespace pstrain
