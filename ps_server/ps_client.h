#ifndef PSTRAIN_PS_SERVER_PS_CLIENT_H_
#define PSTRAIN_PS_SERVER_PS_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tensor.h"
#include "proto/ps.pb.h"

namespace pstrain {

// A connection to one ps task, as workers and the chief see it. Implementations: a gRPC
// client (ps_server/rpc/grpc_ps_client.h) and an in-process one over a VariableStore
// (ps_server/local_ps_client.h) for tests. Every call is bounded by a deadline; errors
// start with name() so the failing task is always named. Thread-safe.
class PsClient {
 public:
  virtual ~PsClient() = default;

  // "ps task 1 (host:port)".
  virtual std::string name() const = 0;

  virtual absl::Status CreateVariables(std::vector<NamedTensor> variables,
                                       const OptimizerConfig& optimizer) = 0;
  virtual absl::StatusOr<std::vector<Tensor>> Pull(absl::Span<const std::string> names) = 0;
  virtual absl::Status Push(absl::Span<const NamedTensor> gradients, int64_t step) = 0;
  // Push, then pull the same variables, in one round trip.
  virtual absl::StatusOr<std::vector<Tensor>> PushPull(absl::Span<const NamedTensor> gradients,
                                                       int64_t step) = 0;
  virtual absl::StatusOr<PsStatusResponse> GetStatus() = 0;
  virtual absl::Status Shutdown(const std::string& reason) = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_SERVER_PS_CLIENT_H_
