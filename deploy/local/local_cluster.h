#ifndef PSTRAIN_DEPLOY_LOCAL_LOCAL_CLUSTER_H_
#define PSTRAIN_DEPLOY_LOCAL_LOCAL_CLUSTER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "deploy/local/process_group.h"

namespace pstrain {

// A parameter-server cluster on loopback: one chief, `num_ps` ps and `num_workers`
// worker processes, each configured only by a TF_CONFIG environment variable in
// TensorFlow's format, on ports picked free at start.
struct LocalClusterOptions {
  // Folder holding ps_server/ps_server, worker/worker and chief/chief (bazel-bin layout).
  std::string bin_dir;
  int num_ps = 2;
  int num_workers = 2;
  std::vector<std::string> chief_args;  // e.g. --job=..., --epochs=...
  std::vector<std::string> task_args;   // given to every task (timeouts, ...)
  std::vector<std::string> worker_args; // given to workers only (--device, ...)
  std::vector<std::string> ps_args;     // given to ps tasks only (--checkpoint_dir, ...)
  std::string host = "localhost";
  // When set, every task also serves Prometheus metrics (the chief its dashboard too) on
  // a free port of its own, given as --metrics_port and recorded here by task name
  // ("chief", "ps0", "worker1", ...).
  std::map<std::string, int>* metrics_ports = nullptr;
};

// The TF_CONFIG of task (`type`, `index`) in a cluster whose jobs are `cluster`
// (job name -> addresses), made with a JSON library.
std::string MakeTfConfig(const std::vector<std::pair<std::string, std::vector<std::string>>>& cluster,
                         const std::string& type, int index);

// The restart rule of an orchestrator (Compose's restart: on-failure, a Kubernetes Job's
// OnFailure): a ps or worker that dies comes back with the same TF_CONFIG; so does a
// chief killed by a signal or preempted (exit 42); a chief that exits otherwise has ended
// the job. Not exit
// code 2 (a bad configuration does not heal), and at most 3 times.
bool RestartLikeAnOrchestrator(const ProcessGroup::Exit& exit);

// Picks ports and starts every task of the cluster in `group` (not owned), named
// "chief", "ps0", "ps1", "worker0", ... Errors: INVALID_ARGUMENT for counts < 1;
// UNAVAILABLE no free port; INTERNAL when a process cannot be started.
absl::Status StartLocalCluster(const LocalClusterOptions& options, ProcessGroup* group);

}  // namespace pstrain

#endif  // PSTRAIN_DEPLOY_LOCAL_LOCAL_CLUSTER_H_
