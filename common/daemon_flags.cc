#include "common/daemon_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

ABSL_FLAG(std::string, tf_config, "",
          "TF_CONFIG JSON; overrides the TF_CONFIG environment variable");
ABSL_FLAG(std::string, cluster, "",
          "Cluster as flags instead of TF_CONFIG: \"chief=h:p;worker=h:p,h:p;ps=h:p\"");
ABSL_FLAG(std::string, task_type, "", "With --cluster: this task's type");
ABSL_FLAG(int, task_index, 0, "With --cluster: this task's index");
ABSL_FLAG(std::string, listen, "",
          "Address to listen on (default: 0.0.0.0 and the port of this task's address)");
ABSL_FLAG(absl::Duration, rpc_timeout, absl::Seconds(30), "Deadline of ordinary RPCs");
ABSL_FLAG(absl::Duration, register_timeout, absl::Seconds(60),
          "How long to wait for the chief (or, on the chief, for every task) at start");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(1), "Heartbeat period");
ABSL_FLAG(absl::Duration, chief_timeout, absl::Seconds(30),
          "Exit when the chief has not answered for this long");

namespace pstrain {

absl::StatusOr<DaemonOptions> DaemonOptionsFromFlags(const std::string& expected_type) {
  DaemonOptions options;
  if (!absl::GetFlag(FLAGS_cluster).empty()) {
    PS_ASSIGN_OR_RETURN(options.config,
                        TfConfigFromFlags(absl::GetFlag(FLAGS_cluster),
                                          absl::GetFlag(FLAGS_task_type),
                                          absl::GetFlag(FLAGS_task_index)));
  } else if (!absl::GetFlag(FLAGS_tf_config).empty()) {
    PS_ASSIGN_OR_RETURN(options.config, ParseTfConfig(absl::GetFlag(FLAGS_tf_config)));
  } else {
    PS_ASSIGN_OR_RETURN(options.config, TfConfigFromEnvironment());
  }
  std::string type = options.config.task.type;
  if (type == "master") type = "chief";
  if (type != expected_type) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TF_CONFIG: task type is \"", options.config.task.type, "\" but this binary runs \"",
        expected_type, "\" tasks"));
  }
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.rpc_timeout = absl::GetFlag(FLAGS_rpc_timeout);
  options.register_timeout = absl::GetFlag(FLAGS_register_timeout);
  options.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  options.chief_timeout = absl::GetFlag(FLAGS_chief_timeout);
  return options;
}

}  // namespace pstrain
