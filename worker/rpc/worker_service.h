#ifndef PSTRAIN_WORKER_RPC_WORKER_SERVICE_H_
#define PSTRAIN_WORKER_RPC_WORKER_SERVICE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/worker.grpc.pb.h"
#include "worker/training_worker.h"

namespace pstrain {

// gRPC adapter over a TrainingWorker. The worker core arrives after the task has
// registered with the chief (the chief sends the job), so until SetWorker() RunSteps
// answers FAILED_PRECONDITION.
class WorkerServiceImpl final : public Worker::Service {
 public:
  explicit WorkerServiceImpl(std::function<void(const std::string&)> on_shutdown);

  // Takes ownership of the core.
  void SetWorker(std::unique_ptr<TrainingWorker> worker) ABSL_LOCKS_EXCLUDED(mu_);

  grpc::Status RunSteps(grpc::ServerContext* context, const RunStepsRequest* request,
                        RunStepsResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext* context, const WorkerStatusRequest* request,
                         WorkerStatusResponse* response) override;
  grpc::Status Shutdown(grpc::ServerContext* context, const ShutdownRequest* request,
                        ShutdownResponse* response) override;

 private:
  TrainingWorker* worker() ABSL_LOCKS_EXCLUDED(mu_);

  const std::function<void(const std::string&)> on_shutdown_;
  absl::Mutex mu_;
  // Set once, then never replaced: the pointer stays valid for the service's lifetime.
  std::unique_ptr<TrainingWorker> worker_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_RPC_WORKER_SERVICE_H_
