#ifndef PSTRAIN_COMMON_DAEMON_CHIEF_CLIENT_H_
#define PSTRAIN_COMMON_DAEMON_CHIEF_CLIENT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/chief.pb.h"

namespace pstrain {

// A connection to the chief, as ps and worker tasks see it. Implementation: gRPC
// (common/daemon/rpc/grpc_chief_client.h). Every call has a deadline; errors start with name().
// Thread-safe.
class ChiefClient {
 public:
  virtual ~ChiefClient() = default;
  // "chief (host:port)".
  virtual std::string name() const = 0;
  virtual absl::StatusOr<RegisterTaskResponse> RegisterTask(const RegisterTaskRequest& request) = 0;
  virtual absl::StatusOr<HeartbeatResponse> Heartbeat(const HeartbeatRequest& request) = 0;
  virtual absl::Status Report(const ReportRequest& request) = 0;
  virtual absl::StatusOr<ChiefStatusResponse> GetStatus() = 0;
  // Asks for a checkpoint now; the call's deadline is the client's timeout.
  virtual absl::StatusOr<SaveCheckpointResponse> SaveCheckpoint() = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DAEMON_CHIEF_CLIENT_H_
