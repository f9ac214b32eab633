#include "common/rpc/grpc_util.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/rpc/call_authorizer.h"
#include "common/rpc/client_security.h"
#include "common/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"

namespace pstrain {
namespace {

// gRPC's synchronous API polls a channel only while a call waits on it. A call that fails
// at once (the peer not listening yet: every job's start, every restarted ps) leaves no
// one polling, and the channel's next connection attempt then advances only when gRPC's
// backup poller runs, by default every 5 s: a task started a moment before its peer
// reached it 5-15 s later, though the peer listened within a second
// (ps_initialization_test took 55 s, 2.5 s with 100 ms). gRPC reads the interval from the
// environment once, when it initialises, so it is set at load time, before anything in
// the process can start gRPC (TLS credentials are made before any channel). A value the
// user set is kept.
[[maybe_unused]] const bool kBackupPollIntervalSet = [] {
  setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "100", /*overwrite=*/0);
  return true;
}();

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view peer) {
  if (status.ok()) return absl::OkStatus();
  std::string message = status.error_message();
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    message = absl::StrCat("no answer before the deadline (", message, ")");
  } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    message = absl::StrCat("unreachable (", message, ")");
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(peer, ": ", message));
}

namespace {

// A duration as a gRPC channel argument (int milliseconds, at least 1).
int MillisecondsArg(absl::Duration d) {
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 1, INT32_MAX));
}

// gRPC logs a failed bind in several lines of its own and then returns no server; this
// finds the common case first and says it in one line. A socket without SO_REUSEPORT (as
// gRPC's, with GRPC_ARG_ALLOW_REUSEPORT off) cannot bind a port another socket listens on,
// whatever options that one set. Errors: UNAVAILABLE naming the address.
absl::Status CheckPortIsFree(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return absl::OkStatus();
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (port == "0") return absl::OkStatus();
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found) != 0) {
    return absl::OkStatus();  // gRPC reports an address it cannot resolve
  }
  absl::Status status;
  for (addrinfo* a = found; a != nullptr && status.ok(); a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 && errno == EADDRINUSE) {
      status = absl::UnavailableError(absl::StrCat(
          "cannot listen on ", address, ": the port is already in use by another process"));
    }
    close(fd);
  }
  freeaddrinfo(found);
  return status;
}

}  // namespace

absl::StatusOr<RunningServer> StartServer(const ServerOptions& options) {
  PS_RETURN_IF_ERROR(CheckPortIsFree(options.listen_address));
  // Both must be set before the builder is created: they install server-wide plugins.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  RunningServer running;
  builder.AddListeningPort(options.listen_address,
                           options.credentials != nullptr ? options.credentials
                                                          : grpc::InsecureServerCredentials(),
                           &running.port);
  // gRPC sets SO_REUSEPORT by default: a second server on the same port would start and
  // take some of the connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                             MillisecondsArg(options.max_connection_age));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                             MillisecondsArg(options.max_connection_age_grace));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  if (options.memory_quota_bytes > 0) {
    // The builder keeps its own reference to the quota.
    grpc::ResourceQuota quota("pstrain-server");
    quota.Resize(static_cast<size_t>(options.memory_quota_bytes));
    builder.SetResourceQuota(quota);
  }
  // First, so that every answer carries the server's proof that it holds the job's secret
  // (call_authorizer.h), whatever the interceptors after it do.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  if (auto reply_proof = ReplyProofInterceptorFactory(options.credentials)) {
    interceptors.push_back(std::move(reply_proof));
  }
  if (options.make_interceptors) {
    for (auto& interceptor : options.make_interceptors()) {
      interceptors.push_back(std::move(interceptor));
    }
  }
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  for (grpc::Service* service : options.services) builder.RegisterService(service);
  running.server = builder.BuildAndStart();
  if (running.server == nullptr || running.port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.listen_address,
        ": the port is in use, or the host is not an address of this machine"));
  }
  SetServing(running.server.get(), true);
  return running;
}

void SetServing(grpc::Server* server, bool serving) {
  if (grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService()) {
    health->SetServingStatus(serving);
  }
}

std::shared_ptr<grpc::Channel> CreateChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Reconnect quickly after a peer restarts instead of gRPC's default backoff of up to 120 s.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // gRPC reads this as the least time one connection attempt (TCP, TLS and HTTP/2
  // handshakes) is given, not as a pause: at 100 ms a peer slow to answer on a loaded
  // machine failed the call ("connection attempt timed out before receiving SETTINGS
  // frame"). A refused connection (nothing listens) still fails at once and is retried
  // after the backoff above.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  // TLS, the job's token and this process's identity on every call (client_security.h).
  std::shared_ptr<grpc::ChannelCredentials> credentials = ClientChannelCredentials();
  auto interceptors = MakeClientSecurityInterceptors();
  if (interceptors.empty()) return grpc::CreateCustomChannel(address, credentials, args);
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, credentials, args,
                                                                 std::move(interceptors));
}

void SetTimeout(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::microseconds(absl::ToInt64Microseconds(timeout)));
}

}  // namespace pstrain
