#ifndef PSTRAIN_COMMON_DAEMON_DAEMON_OPTIONS_H_
#define PSTRAIN_COMMON_DAEMON_DAEMON_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/cluster_spec.h"

namespace pstrain {

// What every daemon (ps_server, worker, chief) needs to know to join its cluster.
struct DaemonOptions {
  TfConfig config;
  // Where this task listens (--bind): a host ("127.0.0.1", "[::1]", "0.0.0.0"), whose port
  // is then the one of the task's own address, or "host:port". Empty: see
  // ResolveListenAddress.
  std::string bind;
  // A second, plaintext port on the same host that serves only grpc.health.v1 (and
  // reflection), for probes that speak no TLS (Kubernetes' gRPC probes); 0: none.
  int health_port = 0;
  // Deadline of ordinary RPCs (pull, push, heartbeat, status).
  absl::Duration rpc_timeout = absl::Seconds(30);
  // How long a task keeps trying to reach the chief at start, and how long the chief
  // waits for every task to register.
  absl::Duration register_timeout = absl::Seconds(60);
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // A task that cannot reach the chief for this long exits (exit code 1).
  absl::Duration chief_timeout = absl::Seconds(30);
  // After the first SIGTERM/SIGINT the daemon has this long to exit by itself (under
  // Kubernetes' default terminationGracePeriodSeconds of 30 s); then it is ended at once.
  absl::Duration shutdown_grace = absl::Seconds(20);
  // The memory gRPC may hold for this daemon's server (--rpc_receive_memory): above all
  // the bytes of calls still arriving, which no handler has seen yet. When it is full
  // gRPC cancels calls to free it (RESOURCE_EXHAUSTED), so a peer that leaves large
  // messages half-sent holds at most this much. 0: no bound (tests that build options).
  int64_t rpc_receive_memory_bytes = 0;
};

// The address this task listens on:
// - options.bind when it has a port; its host with the port of the task's own address
//   when it is a bare host;
// - else the task's own address when its host is a loopback address (localhost,
//   127.0.0.0/8, ::1): a cluster on one machine is not reachable from others;
// - else 0.0.0.0 and the port of the task's own address: in containers the address is a
//   service name that resolves to the pod's or container's IP, so every interface.
// Errors: INVALID_ARGUMENT an address without a valid port; NOT_FOUND the task is not in
//         the cluster spec.
absl::StatusOr<std::string> ResolveListenAddress(const DaemonOptions& options);

// Where a process whose own cluster address is `address` ("host:port") listens when
// nothing says otherwise (the last two rules above): `address` itself for a loopback host,
// else 0.0.0.0 and its port. For processes that are not daemons, e.g. a custom training
// loop serving its all-reduce (pstrain/internal/).
// Errors: INVALID_ARGUMENT an address without a valid port.
absl::StatusOr<std::string> ListenAddressFor(absl::string_view address);

// Whether `host` (no port; brackets allowed) names this machine's loopback interface.
bool IsLoopbackHost(absl::string_view host);

// The chief's address from the cluster spec. Errors: NOT_FOUND no chief in the cluster.
absl::StatusOr<std::string> ChiefAddress(const ClusterSpec& cluster);

// The environment variable that sets a daemon's --health_port when the flag is not given,
// and tells `psctl health` (the image's HEALTHCHECK) to ask that plaintext port: one
// setting makes both work when the daemon's own port speaks mutual TLS.
inline constexpr char kHealthPortEnvironmentVariable[] = "PSTRAIN_HEALTH_PORT";

// PSTRAIN_HEALTH_PORT's port; 0 when it is unset or empty.
// Errors: INVALID_ARGUMENT anything but a port number (1-65535), named.
absl::StatusOr<int> HealthPortFromEnvironment();

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DAEMON_DAEMON_OPTIONS_H_
