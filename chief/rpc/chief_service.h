#ifndef PSTRAIN_CHIEF_RPC_CHIEF_SERVICE_H_
#define PSTRAIN_CHIEF_RPC_CHIEF_SERVICE_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chief/membership.h"
#include "common/logging.h"
#include "proto/chief.grpc.pb.h"

namespace pstrain {

// gRPC adapter over the chief's Membership.
class ChiefServiceImpl final : public Chief::Service {
 public:
  // `membership` is not owned. `job_json` and `job_base_dir` are handed to every task that registers.
  // `describe` fills the job-level part of GetStatus (phase, epoch, step, placement).
  // `save_checkpoint` writes a checkpoint now, waiting at most the given time (see
  // Coordinator::SaveCheckpointNow); may be empty (then SaveCheckpoint is UNIMPLEMENTED).
  ChiefServiceImpl(Membership* membership, std::string job_json, std::string job_base_dir,
                   std::function<void(ChiefStatusResponse*)> describe,
                   std::function<absl::StatusOr<SaveCheckpointResponse>(absl::Duration)>
                       save_checkpoint = nullptr);

  grpc::Status RegisterTask(grpc::ServerContext* context, const RegisterTaskRequest* request,
                            RegisterTaskResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const HeartbeatRequest* request,
                         HeartbeatResponse* response) override;
  grpc::Status Report(grpc::ServerContext* context, const ReportRequest* request,
                      ReportResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext* context, const ChiefStatusRequest* request,
                         ChiefStatusResponse* response) override;
  grpc::Status SaveCheckpoint(grpc::ServerContext* context, const SaveCheckpointRequest* request,
                              SaveCheckpointResponse* response) override;

  // What GetStatus answers: `describe`'s part, every member (with the memory its last
  // heartbeat reported) and the chief's own memory now.
  ChiefStatusResponse Status() const;

 private:
  Membership* const membership_;  // Not owned.
  const std::string job_json_;
  const std::string job_base_dir_;
  const std::function<void(ChiefStatusResponse*)> describe_;
  const std::function<absl::StatusOr<SaveCheckpointResponse>(absl::Duration)> save_checkpoint_;
};

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_RPC_CHIEF_SERVICE_H_
