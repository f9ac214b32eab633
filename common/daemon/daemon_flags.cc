#include "common/daemon/daemon_flags.h"

#include <algorithm>
#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/memory_budget.h"
#include "common/status_macros.h"

ABSL_FLAG(std::string, tf_config, "",
          "TF_CONFIG JSON; overrides the TF_CONFIG environment variable");
ABSL_FLAG(std::string, cluster, "",
          "Cluster as flags instead of TF_CONFIG: \"chief=h:p;worker=h:p,h:p;ps=h:p\"");
ABSL_FLAG(std::string, task_type, "", "With --cluster: this task's type");
ABSL_FLAG(int, task_index, 0, "With --cluster: this task's index");
ABSL_FLAG(std::string, bind, "",
          "Where to listen: a host (the port stays that of this task's address) or "
          "host:port. Default: the host of this task's address when it is a loopback "
          "address (localhost, 127.x.x.x, ::1), else 0.0.0.0");
ABSL_FLAG(int, health_port, 0,
          "Also serve grpc.health.v1 alone, in plaintext, on this port (for Kubernetes' gRPC "
          "probes when the daemon's own port speaks mutual TLS); default: the "
          "PSTRAIN_HEALTH_PORT environment variable (which psctl health also asks), else 0: "
          "none");
ABSL_FLAG(absl::Duration, rpc_timeout, absl::Seconds(30), "Deadline of ordinary RPCs");
ABSL_FLAG(absl::Duration, register_timeout, absl::Seconds(60),
          "How long to wait for the chief (or, on the chief, for every task) at start");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(1), "Heartbeat period");
ABSL_FLAG(absl::Duration, chief_timeout, absl::Seconds(30),
          "Exit when the chief has not answered for this long");
ABSL_FLAG(std::string, rpc_receive_memory, "",
          "Memory gRPC may hold for this daemon's incoming calls before their handlers see "
          "them (a message still arriving); when full, gRPC cancels calls to free it. "
          "Bytes with a K/M/G/T suffix or a share of the machine's memory (\"10%\"); at "
          "least the largest message the job sends times the calls in flight at once; "
          "empty: a quarter of --max_memory");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(20),
          "After SIGTERM/SIGINT, how long the daemon may take to shut down cleanly (the "
          "chief: to write its checkpoint); a second signal or the end of it exits at once");

namespace pstrain {
namespace {

absl::StatusOr<TfConfig> ConfigFromFlagsOrEnvironment(bool cluster_optional, bool* found) {
  *found = true;
  if (!absl::GetFlag(FLAGS_cluster).empty()) {
    return TfConfigFromFlags(absl::GetFlag(FLAGS_cluster), absl::GetFlag(FLAGS_task_type),
                             absl::GetFlag(FLAGS_task_index));
  }
  if (!absl::GetFlag(FLAGS_tf_config).empty()) {
    return ParseTfConfig(absl::GetFlag(FLAGS_tf_config));
  }
  const char* env = std::getenv("TF_CONFIG");
  if (cluster_optional && (env == nullptr || *env == '\0')) {
    *found = false;
    return TfConfig();
  }
  return TfConfigFromEnvironment();
}

// --rpc_receive_memory in bytes; a quarter of --max_memory when empty.
// Errors: INVALID_ARGUMENT as ParseMemorySize, naming the flag.
absl::StatusOr<int64_t> RpcReceiveMemoryBytes() {
  const std::string text = absl::GetFlag(FLAGS_rpc_receive_memory);
  if (text.empty()) return MemoryBudgetBytes() / 4;
  absl::StatusOr<MemorySize> size = ParseMemorySize(text);
  if (!size.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rpc_receive_memory: ", size.status().message()));
  }
  if (size->percent <= 0) return size->bytes;
  return static_cast<int64_t>(static_cast<double>(MachineMemoryBytes()) * size->percent / 100.0);
}

}  // namespace

absl::StatusOr<DaemonOptions> DaemonOptionsFromFlags(const TaskTypes& expected) {
  DaemonOptions options;
  bool found = false;
  PS_ASSIGN_OR_RETURN(options.config,
                      ConfigFromFlagsOrEnvironment(expected.cluster_optional, &found));
  if (found) {
    const Role role = options.config.task.type;
    if (std::find(expected.roles.begin(), expected.roles.end(), role) == expected.roles.end()) {
      std::vector<absl::string_view> names;
      for (Role r : expected.roles) names.push_back(RoleName(r));
      return absl::InvalidArgumentError(absl::StrCat(
          "TF_CONFIG: task type is \"", RoleName(role), "\" but this binary runs \"",
          absl::StrJoin(names, "\" or \""), "\" tasks"));
    }
  }
  options.bind = absl::GetFlag(FLAGS_bind);
  options.health_port = absl::GetFlag(FLAGS_health_port);
  if (options.health_port == 0) {
    PS_ASSIGN_OR_RETURN(options.health_port, HealthPortFromEnvironment());
  }
  if (options.health_port < 0 || options.health_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--health_port=", options.health_port, " is not a port (1-65535, or 0)"));
  }
  options.rpc_timeout = absl::GetFlag(FLAGS_rpc_timeout);
  options.register_timeout = absl::GetFlag(FLAGS_register_timeout);
  options.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  options.chief_timeout = absl::GetFlag(FLAGS_chief_timeout);
  options.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  PS_ASSIGN_OR_RETURN(options.rpc_receive_memory_bytes, RpcReceiveMemoryBytes());
  for (const auto& [name, value] :
       {std::pair<const char*, absl::Duration>{"--rpc_timeout", options.rpc_timeout},
        {"--register_timeout", options.register_timeout},
        {"--heartbeat_interval", options.heartbeat_interval},
        {"--chief_timeout", options.chief_timeout},
        {"--shutdown_grace", options.shutdown_grace}}) {
    if (value <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " must be positive"));
    }
  }
  return options;
}

}  // namespace pstrain
