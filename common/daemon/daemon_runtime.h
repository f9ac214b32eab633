#ifndef PSTRAIN_COMMON_DAEMON_DAEMON_RUNTIME_H_
#define PSTRAIN_COMMON_DAEMON_DAEMON_RUNTIME_H_

// The one runtime every pstrain daemon (ps_server, worker, chief, train) starts through.
//
// A daemon's main() is one call:
//
//   int main(int argc, char** argv) {
//     return pstrain::RunDaemon(argc, argv, {"ps_server", kUsage, {"ps"}, pstrain::RunPsTask});
//   }
//
// and RunDaemon does, in this order:
//   0. (before main) //common/daemon:block_signals_at_load, linked into the binary, blocks
//      SIGTERM and SIGINT from the executable's .preinit_array, so every thread any library
//      starts (OpenBLAS's pool at load, then gRPC's, CUDA's) inherits the blocked mask.
//   1. Flags: --help and --version print and exit 0 (common/daemon/command_line.h).
//   2. TF_CONFIG (or --tf_config, --cluster/--task_type/--task_index) and the shared flags
//      become DaemonOptions; a bad one is one line on stderr and exit 2.
//   3. malloc keeps large blocks (common/malloc_tuning.h), the log tag is the task
//      ("ps0"), the daemon's metrics start (common/metrics/daemon_metrics.h: the registry,
//      and /metrics on --metrics_port; a port that cannot be used is one line and exit 1,
//      a bad one exit 2), and one thread takes SIGTERM/SIGINT with sigwait
//      (common/daemon/signals.h).
//   4. The body runs with a DaemonRuntime: it serves its services through Serve() (health,
//      reflection, an exclusive port on the address ResolveListenAddress picks), does its
//      work and returns an exit code (common/daemon/exit_codes.h).
//   5. The server stops (in-flight calls get two seconds) and main returns the code.
//
// Signals: the first SIGTERM/SIGINT calls the body's signal handler (SetSignalHandler;
// by default a clean shutdown, exit 0) and gives the daemon --shutdown_grace to exit; a
// second signal or the end of the grace ends it at once, with the code the handler chose.
//
// Seams for what comes next, all in this one place:
// - Authorization (#12), in step 2: common/daemon/daemon_security.h reads the job's token
//   (--auth_token_file, PSTRAIN_AUTH_TOKEN) or --insecure; ServerHooks::credentials then
//   carry a CallAuthorizer (common/rpc/call_authorizer.h) that checks every call's MAC
//   (keyed by the token, which is never sent) and identity against the role table
//   (common/rpc/method_roles.h) in gRPC's auth filter, before any handler; the daemon's
//   channels sign each call as its own task and refuse answers whose server does not
//   prove it holds the token (common/rpc/client_security.h, read by CreateChannel). A daemon of a cluster
//   with no token and no --insecure exits 2.
// - TLS (#12): ServerHooks::credentials, filled from flags in RunDaemon, used by Serve();
//   clients get theirs the same way through common/rpc/grpc_util's CreateChannel.
// - Metrics (#13): the runtime makes the daemon's DaemonMetrics, here and only here
//   (metrics(): pstrain_build_info from version.h's kPstrainVersion, the process
//   metrics, /metrics on --metrics_port); a body adds its own families and collectors to
//   metrics()->registry() and calls metrics()->Linger() before its objects go. Per-RPC
//   counters and latencies for every service would go through
//   ServerHooks::make_interceptors, and a gRPC exporter through
//   ServerHooks::extra_services.
// Tests build a DaemonRuntime directly (no flags, no signal thread) and run a task's body
// in a thread; requesting shutdown() stops it.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/daemon/daemon_flags.h"
#include "common/daemon/daemon_options.h"
#include "common/daemon/shutdown_signal.h"
#include "common/metrics/daemon_metrics.h"
#include "common/rpc/grpc_util.h"

namespace pstrain {

// The plaintext --health_port server's bounds (it serves grpc.health.v1 to anyone).
inline constexpr int kMaxHealthMessageBytes = 4 << 10;
inline constexpr int64_t kHealthServerMemoryBytes = int64_t{4} << 20;
inline constexpr int kHealthServerConcurrentCalls = 16;

// What every daemon server carries besides its own services (see the seams above).
struct ServerHooks {
  // Transport security; null: plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // Interceptors every call passes through, in order; unset: none.
  std::function<std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>()>
      make_interceptors;
  // Services served next to the daemon's own on its port. Not owned.
  std::vector<grpc::Service*> extra_services;
};

// A daemon's process-wide state: its options, its shutdown signal, its server and what
// the first SIGTERM/SIGINT does. Thread-safe, except that Serve() is called once, by the
// body, before StopServing().
class DaemonRuntime {
 public:
  // `metrics`: the daemon's, started from its flags by RunDaemon; null (tests) makes a
  // registry without a server.
  explicit DaemonRuntime(DaemonOptions options, ServerHooks hooks = {},
                         std::unique_ptr<DaemonMetrics> metrics = nullptr);
  ~DaemonRuntime();  // Stops the server if it still runs.
  DaemonRuntime(const DaemonRuntime&) = delete;
  DaemonRuntime& operator=(const DaemonRuntime&) = delete;

  const DaemonOptions& options() const { return options_; }
  // How the daemon learns it should stop (a Shutdown RPC, the chief, a signal). The body
  // waits on it; its exit code is what a stopped daemon exits with.
  ShutdownSignal* shutdown() { return &shutdown_; }
  // The daemon's metrics; never null. Lives as long as the runtime, so whatever a body
  // registers on it must be removed (or outlive it) before the body returns.
  DaemonMetrics* metrics() const { return metrics_.get(); }

  // Serves `services` (not owned; they must outlive the runtime) and the hooks' extra
  // services, with health (SERVING) and reflection, on ResolveListenAddress(options()),
  // and health alone in plaintext on options().health_port when set (same host).
  // Logs one line with the address. Call once.
  // Errors: INVALID_ARGUMENT / NOT_FOUND the cluster spec gives this task no valid port;
  //         UNAVAILABLE the address cannot be bound, named (the port is taken).
  absl::Status Serve(std::vector<grpc::Service*> services) ABSL_LOCKS_EXCLUDED(mu_);
  // The port bound by Serve(); 0 before.
  int port() const ABSL_LOCKS_EXCLUDED(mu_);

  // Marks the health service NOT_SERVING and stops the server, giving calls in flight
  // `drain` to finish (then they are cancelled); returns when every handler has
  // returned. Idempotent; a no-op before Serve(). A body calls it (or
  // WaitForShutdownAndStop) before it returns: its services die with it.
  void StopServing(absl::Duration drain = absl::Seconds(2)) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits for shutdown(), stops serving and returns the shutdown's exit code, logging why
  // (what a ps or worker does once it is up).
  int WaitForShutdownAndStop();

  // What the first SIGTERM/SIGINT does: `handler` gets the signal's name, starts the
  // shutdown its way and returns the exit code the daemon is heading for (used if the
  // grace runs out or a second signal comes). The default requests shutdown() with
  // exit code 0. The chief replaces it while it trains (preemption: checkpoint, exit 42).
  using SignalHandler = std::function<int(const std::string& signal_name)>;
  void SetSignalHandler(SignalHandler handler) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs the current handler; called by the signal thread (and by tests).
  int HandleSignal(const std::string& signal_name) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const DaemonOptions options_;
  const ServerHooks hooks_;
  const std::unique_ptr<DaemonMetrics> metrics_;
  ShutdownSignal shutdown_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  RunningServer server_ ABSL_GUARDED_BY(mu_);  // server_.server is null once stopped
  // --health_port's plaintext health-only server; null without one or once stopped.
  RunningServer health_server_ ABSL_GUARDED_BY(mu_);
  SignalHandler signal_handler_ ABSL_GUARDED_BY(mu_);
};

// What one daemon binary is, for RunDaemon.
struct DaemonSpec {
  // The binary's name, for messages ("ps_server").
  std::string binary;
  // What --help prints above the flags.
  std::string usage;
  // The TF_CONFIG task types it runs, and whether it also runs without a cluster.
  TaskTypes tasks;
  // The body: runs until the job ends or runtime->shutdown() is requested, stops serving
  // and returns the exit code.
  std::function<int(DaemonRuntime* runtime)> run;
};

// Runs a daemon from main() (steps 1-5 above). Returns the process exit code.
int RunDaemon(int argc, char** argv, const DaemonSpec& spec);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_DAEMON_DAEMON_RUNTIME_H_
