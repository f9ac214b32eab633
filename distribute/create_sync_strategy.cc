#include "distribute/create_sync_strategy.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/math/backend_factory.h"
#include "common/status_macros.h"
#include "distribute/mirrored_strategy.h"

namespace pstrain {
namespace {

// This worker's CUDA device ordinal when its backend is one, else -1.
int CudaDeviceOf(const Backend& backend) {
  const std::string name = backend.name();
  int device = -1;
  if (!absl::StartsWith(name, "cuda:") || !absl::SimpleAtoi(name.substr(5), &device)) return -1;
  return device;
}

absl::StatusOr<std::unique_ptr<Backend>> BackendFor(const std::string& device) {
  std::string note;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(device, &note);
  if (!backend.ok()) {
    return absl::Status(backend.status().code(),
                        absl::StrCat("device ", device, ": ", backend.status().message()));
  }
  // "auto" says in one line why it fell back to the CPU, as get_strategy()'s fallback does.
  if (!note.empty()) LogInfo(note);
  return backend;
}

// The ring from TF_CONFIG, served as options.serve says; then every worker agrees (one
// small all-reduce) on the gRPC ring or NCCL.
absl::Status CreateMultiWorkerMirrored(const SyncStrategyOptions& options,
                                       SyncStrategySetup* out) {
  if (!options.serve) {
    return absl::InvalidArgumentError("multi_worker_mirrored needs a server for its ring");
  }
  PS_ASSIGN_OR_RETURN(out->ring, MultiWorkerRing::Start(options.config, options.serve));
  const int rank = out->ring->rank();
  const int n = out->ring->num_ranks();
  auto mw = std::make_unique<MultiWorkerMirroredStrategy>(out->ring->transport(),
                                                          options.multi_worker);
  LogInfo(absl::StrCat("multi_worker_mirrored: rank ", rank, " of ", n, " (",
                       absl::StrJoin(out->ring->options().names, ", "),
                       "), serving the all-reduce on port ", out->ring->port()));
  MultiWorkerMirroredStrategy* raw = mw.get();
  PS_ASSIGN_OR_RETURN(
      CollectiveSelection selection,
      SelectCollective(
          [raw](absl::Span<const absl::Span<float>> t) { return raw->RingSumAtStartup(t); }, rank,
          n, options.collective, CudaDeviceOf(*out->first_backend),
          options.multi_worker.ring.timeout));
  LogInfo(selection.description);
  if (selection.nccl != nullptr) mw->UseCollective(std::move(selection.nccl));
  out->strategy = std::move(mw);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> SyncStrategySetup::MakeBackend(int replica) {
  if (replica == 0 && first_backend != nullptr) return std::move(first_backend);
  return BackendFor(replica_devices.empty() ? device : replica_devices[replica]);
}

absl::Status CreateSyncStrategy(const SyncStrategyOptions& options, SyncStrategySetup* out) {
  out->device = options.device;
  switch (options.kind) {
    case StrategyKind::kDefault: {
      PS_ASSIGN_OR_RETURN(out->first_backend, BackendFor(options.device));
      out->strategy = CreateDefaultStrategy();
      return absl::OkStatus();
    }
    case StrategyKind::kMirrored: {
      absl::StatusOr<std::unique_ptr<MirroredStrategy>> mirrored =
          CreateMirroredStrategy(options.devices);
      if (!mirrored.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("devices: ", mirrored.status().message()));
      }
      out->devices = (*mirrored)->devices();
      for (const std::string& d : out->devices) out->replica_devices.push_back(BackendDeviceFor(d));
      PS_ASSIGN_OR_RETURN(out->first_backend, BackendFor(out->replica_devices[0]));
      out->strategy = *std::move(mirrored);
      return absl::OkStatus();
    }
    case StrategyKind::kMultiWorkerMirrored: {
      // The backend first: a bad device fails before this task serves anything.
      PS_ASSIGN_OR_RETURN(out->first_backend, BackendFor(options.device));
      return CreateMultiWorkerMirrored(options, out);
    }
    case StrategyKind::kParameterServer:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("strategy ", StrategyKindName(options.kind),
                   " is not a synchronous strategy (default, mirrored, multi_worker_mirrored)"));
}

}  // namespace pstrain
