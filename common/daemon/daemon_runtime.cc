#include "common/daemon/daemon_runtime.h"

#include <chrono>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/daemon/command_line.h"
#include "common/daemon/daemon_security.h"
#include "common/daemon/exit_codes.h"
#include "common/daemon/signals.h"
#include "common/logging.h"
#include "common/malloc_tuning.h"
#include "common/metrics/metrics_registry.h"
#include "common/rpc/call_authorizer.h"
#include "common/rpc/client_security.h"
#include "common/status_macros.h"

namespace pstrain {

namespace {

// "ps", "worker", "chief"; the binary's name without a cluster ("train").
std::string TaskTypeOr(const DaemonOptions& options, const std::string& binary) {
  const Role role = options.config.task.type;
  return role == Role::kAdmin ? binary : std::string(RoleName(role));
}

}  // namespace

DaemonRuntime::DaemonRuntime(DaemonOptions options, ServerHooks hooks,
                             std::unique_ptr<DaemonMetrics> metrics)
    : options_(std::move(options)),
      hooks_(std::move(hooks)),
      metrics_(metrics != nullptr
                   ? std::move(metrics)
                   : DaemonMetrics::WithoutServer(TaskTypeOr(options_, "test"),
                                                  options_.config.task.index)) {}

DaemonRuntime::~DaemonRuntime() { StopServing(); }

absl::Status DaemonRuntime::Serve(std::vector<grpc::Service*> services) {
  PS_ASSIGN_OR_RETURN(std::string listen, ResolveListenAddress(options_));
  ServerOptions server_options;
  server_options.listen_address = listen;
  server_options.services = std::move(services);
  for (grpc::Service* extra : hooks_.extra_services) server_options.services.push_back(extra);
  server_options.credentials = hooks_.credentials;
  server_options.make_interceptors = hooks_.make_interceptors;
  server_options.memory_quota_bytes = options_.rpc_receive_memory_bytes;
  PS_ASSIGN_OR_RETURN(RunningServer server, StartServer(server_options));
  const int port = server.port;
  RunningServer health;
  if (options_.health_port > 0) {
    // Plaintext and no service of the daemon's: a TLS-less probe learns only whether the
    // daemon serves.
    ServerOptions health_options;
    health_options.listen_address =
        absl::StrCat(listen.substr(0, listen.rfind(':')), ":", options_.health_port);
    // Anyone may call it (no token, no certificate), and a health check is a service
    // name: a peer gets a few KiB per call and a few MiB in all, not the daemon's
    // 256 MiB messages and its receive memory.
    health_options.max_receive_message_bytes = kMaxHealthMessageBytes;
    health_options.memory_quota_bytes = kHealthServerMemoryBytes;
    health_options.max_concurrent_streams = kHealthServerConcurrentCalls;
    absl::StatusOr<RunningServer> started = StartServer(health_options);
    if (!started.ok()) {
      server.server->Shutdown();
      return started.status();
    }
    health = *std::move(started);
    LogInfo(absl::StrCat("health (plaintext, grpc.health.v1 only) on port ", health.port));
  }
  {
    absl::MutexLock lock(&mu_);
    server_ = std::move(server);
    health_server_ = std::move(health);
  }
  LogInfo(absl::StrCat(TaskIdToString(options_.config.task), " serving on port ", port, " (",
                       listen, ")"));
  return absl::OkStatus();
}

int DaemonRuntime::port() const {
  absl::MutexLock lock(&mu_);
  return server_.port;
}

void DaemonRuntime::StopServing(absl::Duration drain) {
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<grpc::Server> health;
  {
    absl::MutexLock lock(&mu_);
    server = std::move(server_.server);
    health = std::move(health_server_.server);
  }
  if (health != nullptr) {
    SetServing(health.get(), false);
    health->Shutdown();
    health->Wait();
  }
  if (server == nullptr) return;
  // Outside the lock: Shutdown waits for the handlers in flight, which may call into the
  // runtime. The server is gone when this returns, so the body's services may go too.
  SetServing(server.get(), false);
  server->Shutdown(std::chrono::system_clock::now() +
                   std::chrono::microseconds(absl::ToInt64Microseconds(drain)));
  server->Wait();
}

int DaemonRuntime::WaitForShutdownAndStop() {
  shutdown_.Wait();
  const int exit_code = shutdown_.exit_code();
  (exit_code == kExitOk ? LogInfo : LogError)(
      absl::StrCat("shutting down: ", shutdown_.reason()));
  StopServing();
  return exit_code;
}

void DaemonRuntime::SetSignalHandler(SignalHandler handler) {
  absl::MutexLock lock(&mu_);
  signal_handler_ = std::move(handler);
}

int DaemonRuntime::HandleSignal(const std::string& signal_name) {
  SignalHandler handler;
  {
    absl::MutexLock lock(&mu_);
    handler = signal_handler_;
  }
  if (handler) return handler(signal_name);
  shutdown_.Request(kExitOk, signal_name);
  return kExitOk;
}

namespace {

// "ps0", "worker1", "chief"; the binary's name without a cluster.
std::string LogTagFor(const DaemonOptions& options, const std::string& binary) {
  const TaskId& task = options.config.task;
  if (task.type == Role::kAdmin) return binary;
  if (task.type == Role::kChief) return std::string(RoleName(task.type));
  return absl::StrCat(RoleName(task.type), task.index);
}

// pstrain_rpc_refused_total{reason}: the calls the authorizer refused.
void CountRefusedCalls(std::shared_ptr<CallAuthorizer> authorizer, MetricsRegistry* registry) {
  registry->AddCollector([authorizer](std::vector<prometheus::MetricFamily>* families) {
    MetricFamilyBuilder("pstrain_rpc_refused_total",
                        "Calls refused before any handler ran: no or a wrong token or "
                        "certificate (unauthenticated), a role the method is not for "
                        "(permission_denied)",
                        prometheus::MetricType::Counter)
        .Add(static_cast<double>(authorizer->refused_unauthenticated()),
             {{"reason", "unauthenticated"}})
        .Add(static_cast<double>(authorizer->refused_permission_denied()),
             {{"reason", "permission_denied"}})
        .AppendTo(families);
  });
}

}  // namespace

int RunDaemon(int argc, char** argv, const DaemonSpec& spec) {
  ParseCommandLineWithUsage(argc, argv, spec.usage);
  // Tensors travel in messages of hundreds of KiB to MiBs, allocated per request.
  KeepLargeBlocksInHeap();
#ifdef NDEBUG
  // Debian's Abseil is built with its lock-order check on: every Mutex acquisition walks
  // a graph of which locks were held together, 2-3% of a training cluster's CPU by perf
  // (bench/README.md, "Abseil's deadlock detection"). An optimized daemon skips it, as a
  // release build of Abseil does; the unit tests, which exercise the same classes without
  // RunDaemon, keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  absl::StatusOr<DaemonOptions> options = DaemonOptionsFromFlags(spec.tasks);
  if (!options.ok()) {
    std::fprintf(stderr, "%s: %s\n", spec.binary.c_str(),
                 std::string(options.status().message()).c_str());
    return kExitBadConfiguration;
  }
  SetLogTag(LogTagFor(*options, spec.binary));
  // Authorization (on by default) before anything listens: a daemon of a cluster with no
  // token and no --insecure stops here.
  absl::StatusOr<DaemonSecurity> security =
      DaemonSecurityFor(*options, SecurityFlagsFromCommandLine());
  if (!security.ok()) {
    std::fprintf(stderr, "%s: %s\n", spec.binary.c_str(),
                 std::string(security.status().message()).c_str());
    return kExitBadConfiguration;
  }
  SetClientSecurity(security->client);
  // The one place a daemon's metrics are made: before anything else binds a port, so a
  // metrics port that cannot be used fails the daemon at once.
  absl::StatusOr<std::unique_ptr<DaemonMetrics>> metrics =
      DaemonMetrics::FromFlags(TaskTypeOr(*options, spec.binary), options->config.task.index);
  if (!metrics.ok()) {
    LogError(metrics.status().message());
    return ExitCodeFor(metrics.status());
  }
  // Lives until the process exits: the signal thread may call it at any time.
  if (security->authorizer != nullptr) {
    CountRefusedCalls(security->authorizer, (*metrics)->registry());
  }
  ServerHooks hooks;
  hooks.credentials = security->server_credentials;
  DaemonRuntime& runtime = *new DaemonRuntime(*options, std::move(hooks), *std::move(metrics));
  if (!ShutdownSignalsBlockedAtLoad()) {
    // A binary that does not link //common/daemon:block_signals_at_load: threads started
    // before this point (OpenBLAS's) may still take a signal and die of it.
    LogWarning("SIGTERM/SIGINT were not blocked at load; link //common/daemon:daemon_main");
  }
  StartSignalThread(options->shutdown_grace, [&runtime](const char* signal_name) {
    // A daemon whose job is over and that only lingers for a last scrape stops now.
    runtime.metrics()->EndLinger();
    return runtime.HandleSignal(signal_name);
  });
  const int exit_code = spec.run(&runtime);
  runtime.StopServing();
  return exit_code;
}

}  // namespace pstrain
