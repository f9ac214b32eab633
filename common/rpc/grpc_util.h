#ifndef PSTRAIN_COMMON_RPC_GRPC_UTIL_H_
#define PSTRAIN_COMMON_RPC_GRPC_UTIL_H_

// The one place where gRPC servers and channels are configured, so that message-size
// limits, health, reflection and (later) TLS and auth are set the same way everywhere.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/server_interceptor.h"

namespace pstrain {

// Largest message a server or channel accepts. Tensors bigger than this are partitioned
// by the caller; gRPC's default of 4 MiB is too small for a dense layer's kernel.
inline constexpr int kMaxMessageBytes = 256 << 20;

// absl::Status <-> grpc::Status, keeping the code and the message.
grpc::Status ToGrpcStatus(const absl::Status& status);
// `peer` names the task that answered (e.g. `ps task 1 (localhost:4001)`): it starts the
// message, so an error read far away still says who failed.
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view peer);

struct ServerOptions {
  // "host:port" to listen on; port 0 picks a free port.
  std::string listen_address;
  // Services to register. Not owned; must outlive the server.
  std::vector<grpc::Service*> services;
  // Bounds on what one peer can hold, which gRPC leaves unbounded: a connection older than
  // max_connection_age is asked to go away (its client reconnects at once) and closed
  // max_connection_age_grace later, whatever it still has in flight, so a call whose
  // message never completes (a length prefix claiming 2 GiB, then 1 KB) is dropped at
  // last; the grace exceeds the longest legitimate call (a worker's training chunk).
  absl::Duration max_connection_age = absl::Minutes(30);
  absl::Duration max_connection_age_grace = absl::Minutes(15);
  // Calls one connection may have in flight at once.
  int max_concurrent_streams = 256;
  // The largest message a call may send the server (larger ones are refused with
  // RESOURCE_EXHAUSTED before a handler runs).
  int max_receive_message_bytes = kMaxMessageBytes;
  // The memory gRPC may hold for this server's connections (a grpc::ResourceQuota), above
  // all the bytes of messages still arriving, which no handler has seen: a message that
  // announces 250 MiB and stops half-way is held whole until it completes or its
  // connection ends. When the quota is full gRPC reads less and cancels calls to free it
  // (their clients see RESOURCE_EXHAUSTED or UNAVAILABLE), so peers that leave messages
  // half-sent hold at most this much. Give at least the largest message the server takes
  // times the calls that may arrive at once. 0: no bound.
  int64_t memory_quota_bytes = 0;
  // The seams for what every daemon's server will carry, so that they are set here and
  // only here (the daemon runtime, common/daemon/daemon_runtime.h, fills them):
  // transport security (TLS); null: plaintext, grpc::InsecureServerCredentials().
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // Makes the interceptors every call passes through, in order (authorization, metrics).
  // Unset: none.
  std::function<std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>()>
      make_interceptors;
};

struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the port actually bound
};

// Builds and starts a server with the default health service (status SERVING for "" and
// every registered service), server reflection, pstrain's message-size limits, and an
// exclusive port: SO_REUSEPORT is off, so a port another process (another pstrain daemon
// too) listens on is an error rather than two servers sharing the connections.
// Errors: UNAVAILABLE when the address cannot be bound, one line naming it (the port is
//         taken, or the host is not an address of this machine).
absl::StatusOr<RunningServer> StartServer(const ServerOptions& options);

// Marks the health service NOT_SERVING, e.g. while a task shuts down.
void SetServing(grpc::Server* server, bool serving);

// A channel with pstrain's message-size limits. Connects lazily.
std::shared_ptr<grpc::Channel> CreateChannel(const std::string& address);

// Sets `context`'s deadline to now + timeout.
void SetTimeout(grpc::ClientContext* context, absl::Duration timeout);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_RPC_GRPC_UTIL_H_
