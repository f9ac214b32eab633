#ifndef PSTRAIN_COMMON_CLUSTER_SPEC_H_
#define PSTRAIN_COMMON_CLUSTER_SPEC_H_

// The cluster a daemon belongs to, in TensorFlow's own terms, so that a TF_CONFIG written
// for tf.distribute (by hand, by Kubeflow's training operator, by a launcher) configures
// pstrain unchanged:
//
//   {"cluster": {"chief": ["h:1"], "worker": ["h:2", "h:3"], "ps": ["h:4"]},
//    "task": {"type": "worker", "index": 0},
//    "environment": "cloud", "rpc_layer": "grpc"}
//
// The same facts can also come from flags (TfConfigFromFlags), so a daemon can be started
// from a shell without JSON.
//
// All types here are plain values; they are immutable after construction and safe to read
// from any thread.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

// What a task is (TF_CONFIG's task type), or who calls an RPC (common/rpc/caller_identity.h:
// an operator's tool is kAdmin). Parsed once where TF_CONFIG or the flags come in
// (TaskId::type), so no code compares task type strings; RoleName gives the string back
// for logs and the wire.
enum class Role {
  kChief,      // the coordinator (TF_CONFIG "chief" or "master")
  kWorker,     // computes and pushes gradients; a ring member in multi_worker_mirrored
  kPs,         // holds variables
  kEvaluator,  // TF's side-car evaluator (runs no pstrain daemon)
  kAdmin,      // an operator's tool (psctl) or a test harness: never a task of TF_CONFIG
};

// "chief", "worker", "ps", "evaluator", "admin".
absl::string_view RoleName(Role role);

// A TF_CONFIG task type ("chief", "master", "worker", "ps", "evaluator") as a role.
// Errors: INVALID_ARGUMENT any other name (naming it).
absl::StatusOr<Role> RoleFromTaskType(absl::string_view type);

// One task of the cluster: its role (the job: RoleName(type) is its name in the cluster
// spec) and index. kAdmin is no task at all: a process run without a cluster (the
// default strategy, `train` alone) or a placeholder config.
struct TaskId {
  Role type = Role::kAdmin;
  int index = 0;
};

bool operator==(const TaskId& a, const TaskId& b);
inline bool operator!=(const TaskId& a, const TaskId& b) { return !(a == b); }

// "worker:1" (for messages and logs; "chief:0" for a chief named "master").
std::string TaskIdToString(const TaskId& task);

// Job name -> ordered list of "host:port" addresses.
//
// Only TensorFlow's job names are allowed: chief, worker, ps, evaluator, and "master",
// which TF treats as the chief: it is stored as "chief" (every accessor accepts either
// name) and remembered, so ToJson() writes it back under the name it came in with.
class ClusterSpec {
 public:
  // The job names pstrain knows, in the order ToJson() writes them.
  static const std::vector<std::string>& KnownJobs();

  // An empty spec (no jobs). Only useful as a placeholder; Create() never returns one.
  ClusterSpec() = default;

  // Validates and builds a spec. `jobs` maps job name -> addresses (index order).
  // A job with no tasks is left out (TF accepts "worker": []).
  // Errors (InvalidArgument, one line starting "cluster spec: "): no tasks at all; a job
  // named twice; a job name other than the five above, or both "chief" and "master"; more than one
  // chief or evaluator task (as TF requires); an address that is not host:port with port
  // 1-65535 (IPv6 hosts in brackets: "[::1]:80"); the same address used by two tasks.
  static absl::StatusOr<ClusterSpec> Create(
      const std::vector<std::pair<std::string, std::vector<std::string>>>& jobs);

  // Addresses of the tasks of `role`'s job in index order; empty when the cluster has
  // none (kAdmin: never a job). Typed, so that a misspelt job name cannot compile.
  const std::vector<std::string>& tasks(Role role) const;
  int num_tasks(Role role) const;
  bool has_job(Role role) const;
  // Job names present, in KnownJobs() order ("chief" for a master).
  std::vector<std::string> jobs() const;
  // Total number of tasks over all jobs.
  int total_tasks() const;
  // True when the chief job was given as "master".
  bool chief_named_master() const { return chief_named_master_; }

  // Address of one task.
  // Errors: InvalidArgument when the role is no job of TF_CONFIG (kAdmin) or the index is
  // negative; NotFound when the job is not in this cluster or the index is out of range.
  absl::StatusOr<std::string> address(const TaskId& task) const;

  // The "cluster" object of TF_CONFIG, e.g. {"chief":["h:1"],"worker":["h:2"]}.
  std::string ToJson() const;

 private:
  // By job name ("master" for the chief too), as TF_CONFIG spells them.
  const std::vector<std::string>& TasksOfJob(absl::string_view job) const;
  // Normalised job name ("master" -> "chief") -> addresses.
  std::map<std::string, std::vector<std::string>> jobs_;
  bool chief_named_master_ = false;
};

// Everything TF_CONFIG says about this process.
struct TfConfig {
  ClusterSpec cluster;
  // Parsed once by the parsers below ("master" is Role::kChief); type kAdmin: no task, a
  // placeholder config.
  TaskId task;
  std::string environment;  // "" when absent ("cloud" and "google" exist in TF)
  std::string rpc_layer;    // "" when absent ("grpc" in TF)
};

// Parses TF_CONFIG text. Accepts TF's format and what Kubeflow and hand-written configs
// use: task index as an integer or a decimal string ("0"); a missing index means 0 (as in
// TF); "master" for the chief; each job either a list of addresses or a sparse-spec object
// {"1": "h:3", "0": "h:2"} whose keys must be exactly 0..n-1. Unknown top-level and task
// keys (e.g. "trial") are ignored, as TF does.
// Validates: the cluster (see ClusterSpec::Create); the task type is a job of the cluster,
// except that an evaluator may be outside it (TF's evaluator runs beside the cluster, index
// 0); the index is in range.
// Errors: InvalidArgument, one line starting "TF_CONFIG: ", e.g.
//   TF_CONFIG: not valid JSON at byte 17      (offset of the offending byte, from 0)
//   TF_CONFIG: task index 3 out of range for job "worker" (2 tasks)
absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json_text);

// Same facts from flags: cluster_flag is "chief=h:1;worker=h:2,h:3;ps=h:4" (spaces around
// names and addresses are ignored). Same validation as ParseTfConfig.
// Errors: InvalidArgument, one line starting "cluster flags: ".
absl::StatusOr<TfConfig> TfConfigFromFlags(const std::string& cluster_flag,
                                           const std::string& task_type, int task_index);

// ParseTfConfig(getenv("TF_CONFIG")).
// Errors: NotFound "TF_CONFIG is not set" when the variable is absent (or empty); else as
// ParseTfConfig. Reads the environment: not safe against a concurrent setenv.
absl::StatusOr<TfConfig> TfConfigFromEnvironment();

// TF_CONFIG text for `config` (what a launcher hands each process); ParseTfConfig reads it
// back to an equal config.
std::string TfConfigToJson(const TfConfig& config);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_CLUSTER_SPEC_H_
