#ifndef PSTRAIN_CHIEF_RPC_CHIEF_SERVICE_H_
#define PSTRAIN_CHIEF_RPC_CHIEF_SERVICE_H_

#include <functional>
#include <string>

#include "chief/membership.h"
#include "common/logging.h"
#include "proto/chief.grpc.pb.h"

namespace pstrain {

// gRPC adapter over the chief's Membership.
class ChiefServiceImpl final : public Chief::Service {
 public:
  // `membership` is not owned. `job_json` and `job_base_dir` are handed to every task that registers.
  // `describe` fills the job-level part of GetStatus (phase, epoch, step, placement).
  ChiefServiceImpl(Membership* membership, std::string job_json, std::string job_base_dir,
                   std::function<void(ChiefStatusResponse*)> describe);

  grpc::Status RegisterTask(grpc::ServerContext* context, const RegisterTaskRequest* request,
                            RegisterTaskResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const HeartbeatRequest* request,
                         HeartbeatResponse* response) override;
  grpc::Status Report(grpc::ServerContext* context, const ReportRequest* request,
                      ReportResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext* context, const ChiefStatusRequest* request,
                         ChiefStatusResponse* response) override;

 private:
  Membership* const membership_;  // Not owned.
  const std::string job_json_;
  const std::string job_base_dir_;
  const std::function<void(ChiefStatusResponse*)> describe_;
};

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_RPC_CHIEF_SERVICE_H_
