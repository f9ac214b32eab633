#ifndef PSTRAIN_WORKER_WORKER_FUNCTIONS_H_
#define PSTRAIN_WORKER_WORKER_FUNCTIONS_H_

// The functions the parameter-server worker daemon runs for the chief, by name, over the
// FunctionWorker service (proto/function.proto) that a custom loop's workers serve too:
// one worker service, whose built-in functions (a name that starts "pstrain.") take their
// arguments and return their result as serialized protos. The daemon's training chunk is
// one of them (kTrainChunkFunction). Knows nothing of gRPC (worker/rpc/worker_service.h
// adapts it).
//
// Thread-safety: every method may be called from any thread. Run calls are not
// serialised here: a function that must run alone (the training chunk) refuses a second
// caller itself, at once, rather than queueing it behind a long chunk.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/function.pb.h"

namespace pstrain {

// The chief's training chunk: arguments a RunStepsRequest, result a RunStepsResponse
// (proto/worker.proto). The chief and the worker meet on the wire, so the name is the
// contract between them.
inline constexpr char kTrainChunkFunction[] = "pstrain.train_chunk";

class WorkerFunctions {
 public:
  // Serialized arguments in, serialized result out, or the function's error.
  using Function = std::function<absl::StatusOr<std::string>(const std::string& arguments)>;
  // Adds the functions' owner's state (busy, steps done, backend) to a status answer.
  using StatusSource = std::function<void(FunctionWorkerStatusResponse* status)>;

  // Larger arguments are refused before any function sees them: the chief's chunk
  // arguments (a placement entry per variable, the ps addresses) are a few KiB, and a
  // hostile caller should not make the worker parse hundreds of MiB.
  static constexpr size_t kMaxArgumentsBytes = 1 << 20;

  // Registers `fn` under `name`; the worker is ready (GetStatus) once one is registered.
  // Errors: INVALID_ARGUMENT an empty name, or one already registered.
  absl::Status Register(std::string name, Function fn) ABSL_LOCKS_EXCLUDED(mu_);
  // Where Status() reads the state of what the functions run on. Call once, before
  // Register.
  void SetStatusSource(StatusSource source) ABSL_LOCKS_EXCLUDED(mu_);

  // Runs request.function() on request.arguments(). Returned errors (the call itself is
  // refused, nothing ran): INVALID_ARGUMENT arguments over kMaxArgumentsBytes. In the
  // response instead, as the custom loop's workers answer (proto/function.proto):
  // FAILED_PRECONDITION a function this worker has not registered (none yet: the job has
  // not arrived), and the function's own error.
  absl::StatusOr<RunFunctionResponse> Run(const RunFunctionRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);

  FunctionWorkerStatusResponse Status() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
  std::vector<Function> functions_ ABSL_GUARDED_BY(mu_);
  StatusSource status_source_ ABSL_GUARDED_BY(mu_);
  int64_t functions_run_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_WORKER_FUNCTIONS_H_
