#ifndef PSTRAIN_COMMON_RPC_METHOD_ROLES_H_
#define PSTRAIN_COMMON_RPC_METHOD_ROLES_H_

// Which roles may call which RPC: the one table every pstrain server's authorization
// reads (common/rpc/call_authorizer.h). A method that is not in the table is refused to
// every caller, so a new RPC is closed until someone decides who may call it
// (method_roles_test checks every method of proto/*.proto has a row).
//
//   ParameterServer  CreateVariables, RestoreState      chief
//                    ReadState, Shutdown                chief, admin
//                    Pull, PullRows                     chief, worker
//                    Push, PushPull, PushPullStream,    worker
//                    PushRows
//   Chief            RegisterTask, Heartbeat, Report    ps, worker (as the task it is:
//                                                       chief/rpc/chief_service.cc)
//                    SaveCheckpoint                     chief, admin
//   Collective       PushChunk, ChunkStream             chief, worker (as the rank it is:
//                                                       distribute/allreduce)
//   FunctionWorker   RunFunction (the worker daemon's    chief
//                    training chunk among the functions)
//                    Shutdown                           chief, admin
//   every service    GetStatus                          any role
//   grpc.health.v1, grpc.reflection: anyone, without a token or a certificate
//
// Knows nothing of gRPC: methods are named by their path, "/pstrain.FunctionWorker/RunFunction".

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/rpc/caller_identity.h"

namespace pstrain {

// Health checks and server reflection: served to anyone (Kubernetes' probes, grpcurl).
bool IsOpenMethod(absl::string_view method);

// Whether `caller` may call `method`.
// Errors: PERMISSION_DENIED naming the method and the caller's role (a method missing
//         from the table too).
absl::Status AuthorizeMethod(absl::string_view method, const CallerIdentity& caller);

// Every method of the table, for tests.
std::vector<std::string> MethodsWithRoles();

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_RPC_METHOD_ROLES_H_
