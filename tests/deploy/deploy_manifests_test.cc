// Checks the deployment files (deploy/docker, deploy/compose, deploy/k8s, deploy/kubeflow)
// without a container engine or a cluster: every TF_CONFIG they hand a task parses with
// pstrain's own ParseTfConfig, all tasks of one deployment list the same cluster, each task's
// type and index match the name it is reachable by, and the commands name binaries the image
// has. Each deployment also has TF_CONFIG's evaluator (the chief binary, TF's side-car
// evaluator), checked apart: the same cluster, its checkpoints read-only, no RPC port. Where docker-compose or kubectl is installed, it also validates with them; where
// not, those cases are skipped with a message.
//
// The YAML is read by a line scan, not a YAML parser (none is guaranteed on a build host):
// the files keep each TF_CONFIG on one line as a single-quoted JSON string, and the scan
// relies on two-space indentation. A file that breaks those rules fails here loudly.

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/cluster_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr char kCompose[] = "deploy/compose/docker-compose.yml";
constexpr char kComposeTls[] = "deploy/compose/docker-compose.tls.yml";
constexpr char kK8sDir[] = "deploy/k8s";
constexpr char kTfJob[] = "deploy/kubeflow/tfjob.yaml";
constexpr char kDockerfile[] = "deploy/docker/Dockerfile";
constexpr char kExampleJob[] = "examples/fashion_mnist.json";
// Where every deployment mounts the chief's checkpoint volume, and the image creates it.
constexpr char kCheckpointDir[] = "/var/lib/pstrain/checkpoints";
constexpr char kComposePrometheus[] = "deploy/compose/prometheus.yml";
// Every task serves Prometheus metrics on this port in its container or pod.
constexpr char kMetricsPort[] = "8080";

// How many times `needle` occurs in `text`.
int Occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}


std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Lines(const std::string& text) { return absl::StrSplit(text, '\n'); }

int Indent(const std::string& line) {
  int n = 0;
  while (n < static_cast<int>(line.size()) && line[n] == ' ') ++n;
  return n;
}

std::string Trimmed(const std::string& line) {
  return std::string(absl::StripAsciiWhitespace(line));
}

// A scalar as YAML writes it: 'single' ('' is a quote), "double" (no escapes here), plain.
std::string Unquote(std::string value) {
  value = Trimmed(value);
  if (value.size() >= 2 && value.front() == '\'' && value.back() == '\'') {
    return absl::StrReplaceAll(value.substr(1, value.size() - 2), {{"''", "'"}});
  }
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
    EXPECT_EQ(value.find('\\'), std::string::npos) << "escapes are not read here: " << value;
    return value.substr(1, value.size() - 2);
  }
  return value;
}

// "key: value" (also "- key: value") on this line: the value, or false.
bool KeyValue(const std::string& line, const std::string& key, std::string* value) {
  std::string t = Trimmed(line);
  if (absl::StartsWith(t, "- ")) t = Trimmed(t.substr(2));
  if (!absl::StartsWith(t, key + ":")) return false;
  std::string rest = t.substr(key.size() + 1);
  if (!rest.empty() && rest[0] != ' ') return false;
  // A trailing comment is only stripped from plain scalars.
  if (!rest.empty() && Trimmed(rest)[0] != '\'' && Trimmed(rest)[0] != '"') {
    const size_t hash = rest.find(" #");
    if (hash != std::string::npos) rest = rest.substr(0, hash);
  }
  *value = Unquote(rest);
  return true;
}

// The lines of a YAML stream, one vector per document ("---" separates them); comments and
// blank lines dropped.
std::vector<std::vector<std::string>> Documents(const std::string& text) {
  std::vector<std::vector<std::string>> docs(1);
  for (const std::string& line : Lines(text)) {
    if (line == "---") {
      docs.emplace_back();
      continue;
    }
    const std::string t = Trimmed(line);
    if (t.empty() || t[0] == '#') continue;
    docs.back().push_back(line);
  }
  std::vector<std::vector<std::string>> nonempty;
  for (auto& doc : docs) {
    if (!doc.empty()) nonempty.push_back(std::move(doc));
  }
  return nonempty;
}

// The value of `parent.child` where parent is a key at `indent` and child one level below
// (first match), e.g. ("metadata", "name") at indent 0. "" when absent.
std::string NestedValue(const std::vector<std::string>& doc, const std::string& parent,
                        const std::string& child, int indent = 0) {
  for (size_t i = 0; i < doc.size(); ++i) {
    if (Indent(doc[i]) != indent || Trimmed(doc[i]) != parent + ":") continue;
    for (size_t j = i + 1; j < doc.size() && Indent(doc[j]) > indent; ++j) {
      std::string value;
      if (Indent(doc[j]) == indent + 2 && KeyValue(doc[j], child, &value)) return value;
    }
  }
  return "";
}

// Every value of `key` anywhere in these lines.
std::vector<std::string> AllValues(const std::vector<std::string>& lines, const std::string& key) {
  std::vector<std::string> values;
  std::string value;
  for (const std::string& line : lines) {
    if (KeyValue(line, key, &value)) values.push_back(value);
  }
  return values;
}

// The env var `name`'s value in a Kubernetes pod spec ("- name: X" then "value: ...").
std::vector<std::string> EnvValues(const std::vector<std::string>& doc, const std::string& name) {
  std::vector<std::string> values;
  for (size_t i = 0; i + 1 < doc.size(); ++i) {
    std::string n, v;
    if (KeyValue(doc[i], "name", &n) && n == name && KeyValue(doc[i + 1], "value", &v)) {
      values.push_back(v);
    }
  }
  return values;
}

// ["a", "b"] flow sequences as the files write commands.
std::vector<std::string> FlowList(const std::string& text) {
  std::string t = Trimmed(text);
  EXPECT_TRUE(absl::StartsWith(t, "[") && absl::EndsWith(t, "]")) << "not a [list]: " << t;
  if (t.size() < 2) return {};
  std::vector<std::string> items;
  for (absl::string_view item : absl::StrSplit(t.substr(1, t.size() - 2), ',')) {
    items.push_back(Unquote(std::string(item)));
  }
  return items;
}

// The items of every block sequence under a line "key:" (e.g. volumeMounts), each as its
// "k: v" pairs, nested ones included (a volume's persistentVolumeClaim.claimName), or as
// {"": scalar} for a plain item ("- a:b" in Compose).
std::vector<std::map<std::string, std::string>> ListItems(const std::vector<std::string>& lines,
                                                          const std::string& key) {
  std::vector<std::map<std::string, std::string>> items;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (Trimmed(lines[i]) != key + ":") continue;
    const int indent = Indent(lines[i]);
    int item_indent = -1;
    for (size_t j = i + 1; j < lines.size() && Indent(lines[j]) > indent; ++j) {
      std::string t = Trimmed(lines[j]);
      if (absl::StartsWith(t, "- ") && (item_indent < 0 || Indent(lines[j]) == item_indent)) {
        item_indent = Indent(lines[j]);
        items.emplace_back();
        t = Trimmed(t.substr(2));
      }
      if (items.empty()) break;  // not a block sequence
      const size_t colon = t.find(": ");
      if (colon != std::string::npos) {
        // The first wins: a nested "name" (configMap.name) does not replace the item's.
        items.back().emplace(t.substr(0, colon), Unquote(t.substr(colon + 2)));
      } else if (absl::EndsWith(t, ":")) {
        items.back().emplace(t.substr(0, t.size() - 1), "");
      } else {
        items.back().emplace("", Unquote(t));
      }
    }
  }
  return items;
}

// The value of --name=VALUE in a command; "" when absent.
std::string FlagValue(const std::vector<std::string>& command, const std::string& name) {
  for (const std::string& arg : command) {
    if (absl::StartsWith(arg, "--" + name + "=")) return arg.substr(name.size() + 3);
  }
  return "";
}

// What every deployment's commands must say for the checkpoints to survive a chief
// restart, and for the other tasks to wait for a restarted chief.
void ExpectFaultToleranceFlags(const std::string& task_type,
                               const std::vector<std::string>& command) {
  SCOPED_TRACE(absl::StrJoin(command, " "));
  if (task_type == "chief") {
    EXPECT_EQ(FlagValue(command, "checkpoint_dir"), kCheckpointDir);
    // Within an epoch too, so a dying ps loses a bounded amount of its updates.
    EXPECT_TRUE(!FlagValue(command, "checkpoint_every").empty() ||
                !FlagValue(command, "checkpoint_every_steps").empty());
    // A restarted chief must resume: --restore=latest is the default.
    const std::string restore = FlagValue(command, "restore");
    EXPECT_TRUE(restore.empty() || restore == "latest") << restore;
  } else {
    // Each ps writes and restores its own checkpoint shards in the chief's folder.
    if (task_type == "ps") EXPECT_EQ(FlagValue(command, "checkpoint_dir"), kCheckpointDir);
    // Longer than the default (30s), to outlast a chief restart.
    absl::Duration timeout;
    ASSERT_TRUE(absl::ParseDuration(FlagValue(command, "chief_timeout"), &timeout))
        << "no --chief_timeout";
    EXPECT_GE(timeout, absl::Seconds(60));
  }
}

enum class Access { kReadWrite, kReadOnly };

// Expects, in one pod spec's lines, a volume named after `claim`'s PersistentVolumeClaim
// mounted at kCheckpointDir. kReadWrite (the chief, a ps): writable, and fsGroup 10001 so
// that the non-root user can write it. kReadOnly (the evaluator): the claim and the mount
// read-only, and no fsGroup (nothing for the kubelet to change on a volume it only reads).
void ExpectCheckpointVolume(const std::vector<std::string>& pod, const std::string& claim,
                            Access access = Access::kReadWrite) {
  const bool read_only = access == Access::kReadOnly;
  std::string volume;
  for (const auto& item : ListItems(pod, "volumes")) {
    if (item.count("claimName") && item.at("claimName") == claim) {
      volume = item.at("name");
      EXPECT_EQ(item.count("readOnly") && item.at("readOnly") == "true", read_only) << volume;
    }
  }
  ASSERT_FALSE(volume.empty()) << "no volume of claim " << claim;
  bool mounted = false;
  for (const auto& item : ListItems(pod, "volumeMounts")) {
    if (item.count("name") && item.at("name") == volume) {
      EXPECT_EQ(item.at("mountPath"), kCheckpointDir);
      EXPECT_EQ(item.count("readOnly") && item.at("readOnly") == "true", read_only) << volume;
      mounted = true;
    }
  }
  EXPECT_TRUE(mounted) << "volume " << volume << " is not mounted";
  if (read_only) {
    EXPECT_THAT(AllValues(pod, "fsGroup"), testing::IsEmpty());
  } else {
    EXPECT_THAT(AllValues(pod, "fsGroup"), ElementsAre("10001"));
  }
}

// Expects a PersistentVolumeClaim document named `name`, ReadWriteMany (the chief and
// every ps, on any node, mount it: each ps writes its own checkpoint shards), with a size.
void ExpectClaim(const std::vector<std::string>& doc, const std::string& name) {
  EXPECT_EQ(NestedValue(doc, "metadata", "name"), name);
  std::vector<std::string> modes;
  for (const auto& item : ListItems(doc, "accessModes")) modes.push_back(item.at(""));
  EXPECT_THAT(modes, ElementsAre("ReadWriteMany"));
  EXPECT_FALSE(NestedValue(doc, "requests", "storage", 4).empty()) << "no storage request";
}

// The top-level kind of a document.
std::string Kind(const std::vector<std::string>& doc) {
  std::string kind;
  for (const std::string& line : doc) {
    if (Indent(line) == 0 && KeyValue(line, "kind", &kind)) return kind;
  }
  return "";
}

// Parses one TF_CONFIG and fails the test (with the text) when it does not parse.
TfConfig MustParse(const std::string& where, const std::string& tf_config) {
  absl::StatusOr<TfConfig> config = ParseTfConfig(tf_config);
  EXPECT_TRUE(config.ok()) << where << ": " << config.status() << "\n  " << tf_config;
  return config.ok() ? *config : TfConfig{};
}

// The binaries the image puts in /usr/local/bin: the targets the Dockerfile builds.
std::set<std::string> ImageBinaries() {
  const std::string dockerfile = ReadFile(kDockerfile);
  std::set<std::string> binaries;
  for (const char* target : {"//ps_server:ps_server", "//worker:worker", "//chief:chief",
                             "//tools:psctl", "//tools:evaluate", "//tools:export_safetensors"}) {
    if (absl::StrContains(dockerfile, target)) {
      binaries.insert(std::string(absl::StripPrefix(strrchr(target, ':'), ":")));
    }
  }
  return binaries;
}

// The Dockerfile from `FROM debian:bookworm-slim AS runtime` on, continuation lines joined.
std::string RuntimeStage() {
  const std::string dockerfile = ReadFile(kDockerfile);
  const size_t from = dockerfile.find("FROM debian:bookworm-slim AS runtime");
  EXPECT_NE(from, std::string::npos);
  return absl::StrReplaceAll(dockerfile.substr(from == std::string::npos ? 0 : from),
                             {{"\\\n", " "}});
}

// The checkout this runfile links to, found through its symlink, for files Bazel does not
// hand this test (examples/ has no BUILD file). "" when it cannot be found.
std::string SourceRoot() {
  char resolved[PATH_MAX];
  if (realpath(kCompose, resolved) == nullptr) return "";
  std::string path = resolved;
  const std::string suffix = std::string("/") + kCompose;
  if (!absl::EndsWith(path, suffix)) return "";
  return path.substr(0, path.size() - suffix.size());
}

// An example job file: from runfiles when Bazel provides it, else from the checkout.
std::string FindExample(const std::string& relative) {
  struct stat st;
  if (stat(relative.c_str(), &st) == 0) return relative;
  const std::string root = SourceRoot();
  if (!root.empty() && stat((root + "/" + relative).c_str(), &st) == 0) {
    return root + "/" + relative;
  }
  return "";
}

// The full path of `program` on PATH (or in /usr/bin, /usr/local/bin); "" when absent.
std::string FindProgram(const std::string& program) {
  const char* path = getenv("PATH");
  std::vector<std::string> dirs = absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':');
  dirs.push_back("/usr/bin");
  dirs.push_back("/usr/local/bin");
  for (const std::string& dir : dirs) {
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) {
      return dir + "/" + program;
    }
  }
  return "";
}

// Runs a shell command; returns its exit status and stdout+stderr.
int RunCommand(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output->append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Expects the cluster of a 1 chief / 2 ps / 2 worker deployment and that `address_of`
// gives each task's address.
template <typename AddressOf>
void ExpectCluster(const ClusterSpec& cluster, AddressOf address_of) {
  EXPECT_EQ(cluster.num_tasks(Role::kChief), 1);
  EXPECT_EQ(cluster.num_tasks(Role::kPs), 2);
  EXPECT_EQ(cluster.num_tasks(Role::kWorker), 2);
  EXPECT_EQ(cluster.total_tasks(), 5);
  for (const std::string& job : cluster.jobs()) {
    absl::StatusOr<Role> role = RoleFromTaskType(job);
    ASSERT_TRUE(role.ok()) << role.status();
    for (int i = 0; i < cluster.num_tasks(*role); ++i) {
      EXPECT_EQ(cluster.tasks(*role)[i], address_of(TaskId{*role, i})) << job << ":" << i;
    }
  }
}

// Every daemon serves /metrics on kMetricsPort and keeps it up a while after the job.
void ExpectMetricsFlags(const std::vector<std::string>& command) {
  EXPECT_THAT(command, testing::Contains(absl::StrCat("--metrics_port=", kMetricsPort)));
  EXPECT_THAT(command, testing::Contains(testing::StartsWith("--metrics_linger=")));
}

// TF_CONFIG's evaluator: the chief binary (it runs the evaluator under task type
// "evaluator"), watching the chief's --checkpoint_dir, with its metrics; no flag of a daemon
// that serves RPC (it serves none).
void ExpectEvaluatorCommand(const std::vector<std::string>& command,
                            const std::vector<std::string>& chief_command) {
  SCOPED_TRACE(absl::StrJoin(command, " "));
  ASSERT_FALSE(command.empty());
  EXPECT_EQ(command[0], "chief");
  EXPECT_FALSE(FlagValue(command, "checkpoint_dir").empty());
  EXPECT_EQ(FlagValue(command, "checkpoint_dir"), FlagValue(chief_command, "checkpoint_dir"));
  ExpectMetricsFlags(command);
  for (const char* flag : {"tls_dir", "health_port", "job", "register_timeout"}) {
    EXPECT_EQ(FlagValue(command, flag), "") << "--" << flag;
  }
}

// An evaluator's TF_CONFIG: the training tasks' cluster (it is not in it, TF's rule) and
// task type evaluator, index 0.
void ExpectEvaluatorTfConfig(const std::string& where, const std::string& tf_config,
                             const std::string& cluster_json) {
  const TfConfig config = MustParse(where, tf_config);
  EXPECT_EQ(config.task.type, Role::kEvaluator) << tf_config;
  EXPECT_EQ(config.task.index, 0);
  EXPECT_FALSE(config.cluster.has_job(Role::kEvaluator)) << "TF's evaluator is not in the cluster";
  EXPECT_EQ(config.cluster.ToJson(), cluster_json) << "not the training tasks' cluster";
}

// Prometheus' usual pod annotations: scrape /metrics on kMetricsPort.
void ExpectScrapeAnnotations(const std::vector<std::string>& doc) {
  EXPECT_THAT(AllValues(doc, "prometheus.io/scrape"), ElementsAre("true"));
  EXPECT_THAT(AllValues(doc, "prometheus.io/port"), ElementsAre(kMetricsPort));
  EXPECT_THAT(AllValues(doc, "prometheus.io/path"), ElementsAre("/metrics"));
}

// A container's OPENBLAS_NUM_THREADS comes from its own CPU limit through the downward API
// (resourceFieldRef limits.cpu, whole cores), and it has a CPU limit: OpenBLAS would
// otherwise start a thread per core of the node.
void ExpectOpenBlasThreadsFromCpuLimit(const std::vector<std::string>& lines) {
  int found = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string name;
    if (!KeyValue(lines[i], "name", &name) || name != "OPENBLAS_NUM_THREADS") continue;
    ++found;
    ASSERT_LT(i + 4, lines.size());
    EXPECT_EQ(Trimmed(lines[i + 1]), "valueFrom:");
    EXPECT_EQ(Trimmed(lines[i + 2]), "resourceFieldRef:");
    std::string resource, divisor;
    EXPECT_TRUE(KeyValue(lines[i + 3], "resource", &resource) && resource == "limits.cpu")
        << lines[i + 3];
    EXPECT_TRUE(KeyValue(lines[i + 4], "divisor", &divisor) && divisor == "1") << lines[i + 4];
  }
  EXPECT_EQ(found, 1) << "OPENBLAS_NUM_THREADS set once, from limits.cpu";
  std::string cpu_limit;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (Trimmed(lines[i]) != "limits:") continue;
    for (size_t j = i + 1; j < lines.size() && Indent(lines[j]) > Indent(lines[i]); ++j) {
      KeyValue(lines[j], "cpu", &cpu_limit);
    }
  }
  int cores = 0;
  EXPECT_TRUE(absl::SimpleAtoi(cpu_limit, &cores) && cores >= 1)
      << "a CPU limit of whole cores, not '" << cpu_limit << "'";
}

// ---- Docker Compose --------------------------------------------------------------------

struct ComposeService {
  std::string tf_config;
  std::vector<std::string> command;
  std::string restart;
  std::string image;
  std::vector<std::string> volumes;
  std::string cpus;                  // deploy.resources.limits.cpus
  std::string openblas_threads;      // environment OPENBLAS_NUM_THREADS
  std::vector<std::string> profiles;  // none: `up` starts it
  bool has_auth_token = false;       // environment PSTRAIN_AUTH_TOKEN
  bool healthcheck_disabled = false;  // healthcheck.disable: true
  bool publishes_ports = false;      // "ports:"
};

// Services of the compose file: top-level "services:", each a key at indent 2; the shared
// settings come from the x-pstrain anchor merged with "<<: *pstrain".
std::map<std::string, ComposeService> ComposeServices(const char* file = kCompose) {
  const std::vector<std::string> doc = Documents(ReadFile(file)).at(0);
  ComposeService defaults;
  std::map<std::string, ComposeService> services;
  std::string section;  // top-level key
  std::string current;  // service
  bool in_volumes = false;  // a service's "volumes:" list
  for (const std::string& line : doc) {
    if (Indent(line) <= 2) in_volumes = false;
    if (Indent(line) == 0) {
      section = std::string(absl::StripSuffix(Trimmed(line), ":"));
      section = section.substr(0, section.find(':'));
      current.clear();
      continue;
    }
    ComposeService* target = nullptr;
    if (section == "x-pstrain") {
      target = &defaults;
    } else if (section == "services") {
      if (Indent(line) == 2) {
        current = std::string(absl::StripSuffix(Trimmed(line), ":"));
        services[current] = ComposeService{};
        continue;
      }
      target = &services[current];
      std::string merge;
      if (KeyValue(line, "<<", &merge)) {
        EXPECT_EQ(merge, "*pstrain") << current;
        *target = defaults;
        continue;
      }
    } else {
      continue;
    }
    std::string value;
    if (KeyValue(line, "TF_CONFIG", &value)) target->tf_config = value;
    if (KeyValue(line, "command", &value)) target->command = FlowList(value);
    if (KeyValue(line, "restart", &value)) target->restart = value;
    if (KeyValue(line, "image", &value)) target->image = value;
    if (KeyValue(line, "cpus", &value)) target->cpus = value;
    if (KeyValue(line, "OPENBLAS_NUM_THREADS", &value)) target->openblas_threads = value;
    if (KeyValue(line, "profiles", &value)) target->profiles = FlowList(value);
    if (KeyValue(line, "PSTRAIN_AUTH_TOKEN", &value)) target->has_auth_token = true;
    if (KeyValue(line, "disable", &value)) target->healthcheck_disabled = value == "true";
    if (Indent(line) == 4 && Trimmed(line) == "ports:") target->publishes_ports = true;
    if (Indent(line) == 6 && absl::StartsWith(Trimmed(line), "- ") && in_volumes) {
      target->volumes.push_back(Unquote(Trimmed(line).substr(2)));
    }
    if (Indent(line) == 4) in_volumes = Trimmed(line) == "volumes:";
  }
  return services;
}

// The services `up` starts (those of no profile): the training tasks.
std::map<std::string, ComposeService> ComposeTasks(const char* file = kCompose) {
  std::map<std::string, ComposeService> tasks;
  for (const auto& [name, service] : ComposeServices(file)) {
    if (service.profiles.empty()) tasks.emplace(name, service);
  }
  return tasks;
}

// The top-level "volumes:" of the compose file: name -> its lines.
std::map<std::string, std::vector<std::string>> ComposeVolumes() {
  const std::vector<std::string> doc = Documents(ReadFile(kCompose)).at(0);
  std::map<std::string, std::vector<std::string>> volumes;
  bool in_volumes = false;
  std::string current;
  for (const std::string& line : doc) {
    if (Indent(line) == 0) {
      in_volumes = Trimmed(line) == "volumes:";
    } else if (in_volumes && Indent(line) == 2) {
      current = std::string(absl::StripSuffix(Trimmed(line), ":"));
      volumes[current];
    } else if (in_volumes) {
      volumes[current].push_back(line);
    }
  }
  return volumes;
}

// The compose service name of a task: "chief", "ps0", "worker1".
std::string ComposeName(const TaskId& task) {
  return task.type == Role::kChief ? "chief" : absl::StrCat(RoleName(task.type), task.index);
}

TEST(ComposeTest, EveryServiceIsOneTaskOfTheSameCluster) {
  // The five tasks `up` starts (tests/deploy/container_e2e.sh expects them); the evaluator
  // only with its profile (EvaluatorServiceRunsOnlyWithItsProfile).
  const std::map<std::string, ComposeService> services = ComposeTasks();
  std::vector<std::string> names;
  for (const auto& [name, service] : services) names.push_back(name);
  EXPECT_THAT(names, UnorderedElementsAre("chief", "ps0", "ps1", "worker0", "worker1"));
  std::vector<std::string> all;
  for (const auto& [name, service] : ComposeServices()) all.push_back(name);
  EXPECT_THAT(all, UnorderedElementsAre("chief", "ps0", "ps1", "worker0", "worker1", "evaluator"));

  const std::set<std::string> binaries = ImageBinaries();
  std::string cluster_json;
  for (const auto& [name, service] : services) {
    SCOPED_TRACE(name);
    ASSERT_FALSE(service.tf_config.empty()) << "no TF_CONFIG";
    const TfConfig config = MustParse(name, service.tf_config);
    EXPECT_EQ(ComposeName(config.task), name) << "task " << TaskIdToString(config.task);
    if (cluster_json.empty()) cluster_json = config.cluster.ToJson();
    EXPECT_EQ(config.cluster.ToJson(), cluster_json) << "clusters differ";
    ExpectCluster(config.cluster, [](const TaskId& t) { return ComposeName(t) + ":2222"; });

    EXPECT_EQ(service.image, "pstrain:latest");
    EXPECT_TRUE(absl::StartsWith(service.restart, "on-failure")) << service.restart;
    ASSERT_FALSE(service.command.empty());
    EXPECT_TRUE(binaries.count(service.command[0])) << service.command[0] << " not in image";
    const std::string type(RoleName(config.task.type));
    const std::string expected_binary = config.task.type == Role::kPs ? "ps_server" : type;
    EXPECT_EQ(service.command[0], expected_binary);
    ExpectFaultToleranceFlags(type, service.command);
    ExpectMetricsFlags(service.command);
    if (config.task.type == Role::kPs) {
      // The chief's checkpoint volume, where each ps writes its own shards.
      EXPECT_EQ(FlagValue(service.command, "checkpoint_dir"), kCheckpointDir) << name;
      EXPECT_THAT(service.volumes, testing::ElementsAre(absl::StrCat("checkpoints:", kCheckpointDir)))
          << name;
    } else if (config.task.type != Role::kChief) {
      EXPECT_THAT(service.volumes, testing::IsEmpty());
    }
  }
  // The image has examples/ at /opt/pstrain/examples.
  EXPECT_THAT(services.at("chief").command,
              testing::Contains("--job=/opt/pstrain/examples/fashion_mnist.json"));
  if (FindExample(kExampleJob).empty()) {
    std::printf("note: cannot reach %s from here; its presence was not checked\n", kExampleJob);
  }
}

// TF's side-car evaluator: the chief binary under task type evaluator, started only by
// `--profile evaluator`, reading the chief's checkpoint volume read-only; it serves no RPC,
// so no token, no healthcheck of a gRPC port, no published port.
TEST(ComposeTest, EvaluatorServiceRunsOnlyWithItsProfile) {
  const std::map<std::string, ComposeService> services = ComposeServices();
  ASSERT_TRUE(services.count("evaluator"));
  ASSERT_TRUE(services.count("chief"));
  const ComposeService& evaluator = services.at("evaluator");
  const ComposeService& chief = services.at("chief");
  EXPECT_THAT(evaluator.profiles, ElementsAre("evaluator"));
  ASSERT_FALSE(evaluator.tf_config.empty()) << "no TF_CONFIG";
  ASSERT_FALSE(chief.tf_config.empty());
  ExpectEvaluatorTfConfig("evaluator", evaluator.tf_config,
                          MustParse("chief", chief.tf_config).cluster.ToJson());
  ExpectEvaluatorCommand(evaluator.command, chief.command);
  EXPECT_TRUE(ImageBinaries().count(evaluator.command.at(0)));
  EXPECT_EQ(evaluator.image, chief.image);
  // It ends: exit 0 after the job's final checkpoint, which on-failure does not restart.
  EXPECT_TRUE(absl::StartsWith(evaluator.restart, "on-failure")) << evaluator.restart;
  EXPECT_FALSE(evaluator.has_auth_token);
  EXPECT_TRUE(evaluator.healthcheck_disabled) << "the image's HEALTHCHECK asks a gRPC port";
  EXPECT_FALSE(evaluator.publishes_ports);
  // The chief's checkpoint volume, read-only, and a volume of its own for TensorBoard at
  // its --logdir, one the image creates owned by its user (as the checkpoint folder).
  ASSERT_THAT(chief.volumes, testing::SizeIs(1));
  const std::string logdir = FlagValue(evaluator.command, "logdir");
  ASSERT_FALSE(logdir.empty()) << "no --logdir";
  EXPECT_THAT(evaluator.volumes,
              ElementsAre(absl::StrCat(chief.volumes[0], ":ro"), testing::EndsWith(":" + logdir)));
  const std::map<std::string, std::vector<std::string>> volumes = ComposeVolumes();
  for (const std::string& volume : evaluator.volumes) {
    const std::string name = volume.substr(0, volume.find(':'));
    EXPECT_TRUE(volumes.count(name)) << "no top-level volume " << name;
  }
  EXPECT_THAT(RuntimeStage(), HasSubstr(absl::StrCat("install -d -o 10001 -g 10001 -m 0750 ", logdir)));
  // docker-compose.tls.yml has nothing for it: no RPC, nothing to encrypt.
  EXPECT_FALSE(ComposeServices(kComposeTls).count("evaluator"));
}

TEST(ComposeTest, PrometheusConfigScrapesEveryService) {
  const std::string config = ReadFile(kComposePrometheus);
  ASSERT_FALSE(config.empty()) << kComposePrometheus;
  int targets = 0;
  for (const std::string& line : Lines(config)) {
    if (absl::StrContains(line, "targets:")) ++targets;
  }
  const std::map<std::string, ComposeService> services = ComposeServices();
  EXPECT_EQ(targets, static_cast<int>(services.size()));
  for (const auto& [name, service] : services) {
    EXPECT_THAT(config, HasSubstr(absl::StrCat("['", name, ":", kMetricsPort, "']"))) << name;
    EXPECT_THAT(config, HasSubstr(absl::StrCat("labels: {task: ", name, "}"))) << name;
  }
  // The port every container declares.
  EXPECT_THAT(ReadFile(kCompose), HasSubstr(absl::StrCat("expose:\n    - \"", kMetricsPort, "\"")));
  // The evaluator, down without its profile, in a job of its own: up{job="pstrain"} still
  // counts the training tasks alone.
  EXPECT_EQ(Occurrences(config, "job_name: "), 2);
  EXPECT_THAT(config, HasSubstr("job_name: pstrain-evaluator\n    static_configs:\n"
                                "      - targets: ['evaluator:8080']\n"));
}

TEST(ComposeTest, ChiefCheckpointsToANamedVolume) {
  const std::map<std::string, ComposeService> services = ComposeServices();
  ASSERT_TRUE(services.count("chief"));
  const ComposeService& chief = services.at("chief");
  // A named volume (not a bind mount: Docker copies the image folder's owner, 10001, into
  // it when it is new) at the folder --checkpoint_dir names.
  ASSERT_THAT(chief.volumes, testing::SizeIs(1));
  const std::vector<std::string> parts = absl::StrSplit(chief.volumes[0], ':');
  ASSERT_GE(parts.size(), 2u) << chief.volumes[0];
  EXPECT_EQ(parts[1], kCheckpointDir);
  EXPECT_TRUE(parts.size() == 2 || parts[2] != "ro") << chief.volumes[0];
  EXPECT_FALSE(absl::StartsWith(parts[0], "/") || absl::StartsWith(parts[0], "."))
      << "a bind mount, not a named volume: " << chief.volumes[0];
  const std::map<std::string, std::vector<std::string>> volumes = ComposeVolumes();
  EXPECT_TRUE(volumes.count(parts[0])) << "no top-level volume " << parts[0];
}

TEST(ComposeTest, OpenBlasThreadsMatchEachContainersCpuLimit) {
  const std::map<std::string, ComposeService> services = ComposeServices();
  ASSERT_EQ(services.size(), 6u);  // the evaluator's evaluation uses OpenBLAS too
  for (const auto& [name, service] : services) {
    int cpus = 0;
    EXPECT_TRUE(absl::SimpleAtoi(service.cpus, &cpus) && cpus >= 1)
        << name << ": deploy.resources.limits.cpus of whole cores, not '" << service.cpus << "'";
    EXPECT_EQ(service.openblas_threads, service.cpus) << name;
  }
}

// Authorization is on by default: every task gets the job's token, and Compose refuses to
// start without one rather than starting daemons that exit 2. (Not the evaluator, which
// calls no task and needs none.)
TEST(ComposeTest, EveryServiceGetsTheJobsAuthToken) {
  EXPECT_EQ(Occurrences(ReadFile(kCompose), "PSTRAIN_AUTH_TOKEN: ${PSTRAIN_AUTH_TOKEN:?"), 5);
}

// The mutual-TLS override runs the same commands with --tls_dir and --health_port added,
// every service mounting the certificates and checking health on the plaintext port.
TEST(ComposeTest, TheTlsOverrideAddsCertificatesToEveryTask) {
  const std::map<std::string, ComposeService> base = ComposeTasks();
  const std::map<std::string, ComposeService> tls = ComposeServices(kComposeTls);
  ASSERT_EQ(tls.size(), base.size());
  for (const auto& [name, service] : base) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(tls.count(name));
    std::vector<std::string> expected = service.command;
    expected.push_back("--tls_dir=/etc/pstrain/tls");
    expected.push_back("--health_port=2223");
    EXPECT_EQ(tls.at(name).command, expected);
    EXPECT_THAT(tls.at(name).volumes, ElementsAre("./certs:/etc/pstrain/tls:ro"));
  }
  EXPECT_EQ(Occurrences(ReadFile(kComposeTls), "\"--address=localhost:2223\""),
            static_cast<int>(base.size()));
}

TEST(ComposeTest, DockerComposeAcceptsTheFile) {
  const std::string docker_compose = FindProgram("docker-compose");
  if (docker_compose.empty()) {
    GTEST_SKIP() << "docker-compose is not installed; `docker-compose config -q` not run";
  }
  // The base file alone, and with the TLS file merged over it, as deploy/README runs them.
  // (Both need PSTRAIN_AUTH_TOKEN, which .bazelrc's test_env sets.)
  std::string output;
  int rc = RunCommand(absl::StrCat(docker_compose, " -f ", kCompose, " config -q"), &output);
  EXPECT_EQ(rc, 0) << output;
  rc = RunCommand(
      absl::StrCat(docker_compose, " -f ", kCompose, " -f ", kComposeTls, " config -q"), &output);
  EXPECT_EQ(rc, 0) << output;
  // It reads the evaluator's profile (docker-compose >= 1.28), and accepts it enabled.
  output.clear();
  rc = RunCommand(absl::StrCat(docker_compose, " -f ", kCompose, " config --profiles"), &output);
  EXPECT_EQ(rc, 0) << output;
  EXPECT_EQ(output, "evaluator\n");
  output.clear();
  rc = RunCommand(
      absl::StrCat(docker_compose, " -f ", kCompose, " --profile evaluator config -q"), &output);
  EXPECT_EQ(rc, 0) << output;
}

// ---- Kubernetes ------------------------------------------------------------------------

std::vector<std::vector<std::string>> K8sDocuments(const std::string& file) {
  return Documents(ReadFile(absl::StrCat(kK8sDir, "/", file)));
}

std::vector<std::string> KustomizeResources() {
  const std::vector<std::string> doc = K8sDocuments("kustomization.yaml").at(0);
  std::vector<std::string> resources;
  bool in_resources = false;
  for (const std::string& line : doc) {
    if (Indent(line) == 0) {
      in_resources = Trimmed(line) == "resources:";
    } else if (in_resources) {
      resources.push_back(std::string(absl::StripPrefix(Trimmed(line), "- ")));
    }
  }
  return resources;
}

TEST(K8sTest, EveryJobIsOneTaskOfTheSameCluster) {
  const std::vector<std::string> resources = KustomizeResources();
  EXPECT_THAT(resources,
              UnorderedElementsAre("checkpoints.yaml", "services.yaml", "chief.yaml", "ps.yaml",
                                   "worker.yaml", "evaluator.yaml"));
  std::map<std::string, std::vector<std::string>> services;  // name -> its doc
  std::map<std::string, std::vector<std::string>> jobs;
  std::map<std::string, std::vector<std::string>> claims;
  for (const std::string& file : resources) {
    for (const auto& doc : K8sDocuments(file)) {
      std::string k;
      for (const std::string& line : doc) {
        if (Indent(line) == 0 && KeyValue(line, "kind", &k)) break;
      }
      const std::string name = NestedValue(doc, "metadata", "name");
      if (k == "Service") {
        services[name] = doc;
      } else if (k == "Job") {
        jobs[name] = doc;
      } else if (k == "PersistentVolumeClaim") {
        claims[name] = doc;
      } else {
        ADD_FAILURE() << file << ": unexpected kind " << k;
      }
    }
  }
  // The chief's checkpoint volume.
  std::vector<std::string> claim_names;
  for (const auto& [name, doc] : claims) claim_names.push_back(name);
  EXPECT_THAT(claim_names, ElementsAre("pstrain-checkpoints"));
  for (const auto& [name, doc] : claims) ExpectClaim(doc, name);
  std::vector<std::string> job_names;
  for (const auto& [name, doc] : jobs) job_names.push_back(name);
  EXPECT_THAT(job_names, UnorderedElementsAre("pstrain-chief-0", "pstrain-ps-0", "pstrain-ps-1",
                                              "pstrain-worker-0", "pstrain-worker-1",
                                              "pstrain-evaluator-0"));

  const std::set<std::string> binaries = ImageBinaries();
  std::string cluster_json;
  for (const auto& [name, doc] : jobs) {
    SCOPED_TRACE(name);
    const std::vector<std::string> tf_configs = EnvValues(doc, "TF_CONFIG");
    ASSERT_EQ(tf_configs.size(), 1u);
    const TfConfig config = MustParse(name, tf_configs[0]);
    const std::string type(RoleName(config.task.type));
    EXPECT_EQ(absl::StrCat("pstrain-", type, "-", config.task.index), name);
    if (cluster_json.empty()) cluster_json = config.cluster.ToJson();
    EXPECT_EQ(config.cluster.ToJson(), cluster_json) << "clusters differ";
    ExpectCluster(config.cluster, [](const TaskId& t) {
      return absl::StrCat("pstrain-", RoleName(t.type), "-", t.index, ":2222");
    });
    // Checked apart (EvaluatorJobReadsTheCheckpointsReadOnly): it serves no RPC, so no
    // Service, no gRPC port and no probes.
    if (config.task.type == Role::kEvaluator) {
      EXPECT_FALSE(services.count(name)) << "a Service for a task that serves no RPC";
      continue;
    }

    // The headless Service of the same name selects exactly this Job's pods.
    ASSERT_TRUE(services.count(name)) << "no Service " << name;
    const std::vector<std::string>& service = services.at(name);
    EXPECT_EQ(NestedValue(service, "spec", "clusterIP"), "None");
    EXPECT_EQ(NestedValue(service, "spec", "publishNotReadyAddresses"), "true");
    const std::string task_label = absl::StrCat(type, "-", config.task.index);
    EXPECT_EQ(NestedValue(service, "selector", "pstrain/task", 2), task_label);
    EXPECT_THAT(AllValues(doc, "pstrain/task"), testing::Each(task_label));
    EXPECT_THAT(AllValues(service, "port"), ElementsAre("2222", kMetricsPort));

    EXPECT_EQ(NestedValue(doc, "spec", "backoffLimit"), "4");
    EXPECT_THAT(AllValues(doc, "restartPolicy"), ElementsAre("OnFailure"));
    EXPECT_THAT(AllValues(doc, "containerPort"), ElementsAre("2222", kMetricsPort));
    ExpectScrapeAnnotations(doc);
    // readinessProbe and livenessProbe, both gRPC on 2222.
    EXPECT_EQ(AllValues(doc, "grpc").size(), 2u);
    EXPECT_THAT(AllValues(doc, "port"), ElementsAre("2222", "2222"));
    EXPECT_EQ(AllValues(doc, "requests").size(), 1u);
    EXPECT_EQ(AllValues(doc, "limits").size(), 1u);
    ExpectOpenBlasThreadsFromCpuLimit(doc);

    const std::vector<std::string> commands = AllValues(doc, "command");
    ASSERT_EQ(commands.size(), 1u);
    const std::vector<std::string> command = FlowList(commands[0]);
    ASSERT_FALSE(command.empty());
    EXPECT_TRUE(binaries.count(command[0])) << command[0] << " not in image";
    ExpectFaultToleranceFlags(type, command);
    ExpectMetricsFlags(command);
    if (config.task.type == Role::kChief) {
      // The job spec comes from the ConfigMap mounted at /etc/pstrain/job, the checkpoints
      // go to the PersistentVolumeClaim.
      EXPECT_THAT(command, testing::Contains("--job=/etc/pstrain/job/fashion_mnist.json"));
      EXPECT_THAT(AllValues(doc, "mountPath"),
                  UnorderedElementsAre("/etc/pstrain/job", kCheckpointDir));
      EXPECT_THAT(AllValues(doc, "name"), testing::Contains("pstrain-job"));
      ExpectCheckpointVolume(doc, "pstrain-checkpoints");
    } else if (config.task.type == Role::kPs) {
      // Its shards of every checkpoint, in the same claim.
      EXPECT_THAT(AllValues(doc, "mountPath"), ElementsAre(kCheckpointDir));
      ExpectCheckpointVolume(doc, "pstrain-checkpoints");
    } else {
      EXPECT_THAT(AllValues(doc, "mountPath"), testing::IsEmpty());
    }
  }
}

// TF's side-car evaluator as a Job of its own: the chief binary under task type evaluator,
// with the training tasks' cluster, the chief's checkpoint claim read-only, its metrics
// port and scrape annotations, and nothing of a daemon that serves RPC.
TEST(K8sTest, EvaluatorJobReadsTheCheckpointsReadOnly) {
  const std::vector<std::vector<std::string>> docs = K8sDocuments("evaluator.yaml");
  ASSERT_EQ(docs.size(), 1u);
  const std::vector<std::string>& doc = docs[0];
  EXPECT_EQ(Kind(doc), "Job");
  EXPECT_EQ(NestedValue(doc, "metadata", "name"), "pstrain-evaluator-0");
  const std::vector<std::vector<std::string>> chiefs = K8sDocuments("chief.yaml");
  ASSERT_EQ(chiefs.size(), 1u);
  const std::vector<std::string>& chief = chiefs[0];

  const std::vector<std::string> tf_configs = EnvValues(doc, "TF_CONFIG");
  ASSERT_EQ(tf_configs.size(), 1u);
  ASSERT_EQ(EnvValues(chief, "TF_CONFIG").size(), 1u);
  ExpectEvaluatorTfConfig("evaluator.yaml", tf_configs[0],
                          MustParse("chief.yaml", EnvValues(chief, "TF_CONFIG")[0]).cluster.ToJson());
  const std::vector<std::string> commands = AllValues(doc, "command");
  ASSERT_EQ(commands.size(), 1u);
  ASSERT_EQ(AllValues(chief, "command").size(), 1u);
  ExpectEvaluatorCommand(FlowList(commands[0]), FlowList(AllValues(chief, "command")[0]));
  EXPECT_EQ(AllValues(doc, "image"), AllValues(chief, "image"));

  // It ends (exit 0 after the final checkpoint, the Job completes); a failure restarts it.
  EXPECT_EQ(NestedValue(doc, "spec", "backoffLimit"), "4");
  EXPECT_THAT(AllValues(doc, "restartPolicy"), ElementsAre("OnFailure"));
  EXPECT_THAT(AllValues(doc, "app.kubernetes.io/component"), testing::Each("evaluator"));
  EXPECT_THAT(AllValues(doc, "pstrain/task"), testing::Each("evaluator-0"));
  // Metrics only: no gRPC port, no probes, no token.
  EXPECT_THAT(AllValues(doc, "containerPort"), ElementsAre(kMetricsPort));
  EXPECT_THAT(AllValues(doc, "grpc"), testing::IsEmpty());
  EXPECT_THAT(AllValues(doc, "port"), testing::IsEmpty());
  for (const char* probe : {"readinessProbe:", "livenessProbe:"}) {
    for (const std::string& line : doc) EXPECT_NE(Trimmed(line), probe);
  }
  EXPECT_THAT(AllValues(doc, "name"), testing::Not(testing::Contains("PSTRAIN_AUTH_TOKEN")));
  ExpectScrapeAnnotations(doc);
  ExpectOpenBlasThreadsFromCpuLimit(doc);
  EXPECT_THAT(AllValues(doc, "runAsUser"), ElementsAre("10001"));
  // The chief's claim, at its folder, read-only.
  EXPECT_THAT(AllValues(doc, "mountPath"), ElementsAre(kCheckpointDir));
  ExpectCheckpointVolume(doc, "pstrain-checkpoints", Access::kReadOnly);
}

TEST(K8sTest, ConfigMapIsTheExampleJobSpec) {
  const std::string kustomization = ReadFile(absl::StrCat(kK8sDir, "/kustomization.yaml"));
  EXPECT_THAT(kustomization, HasSubstr("- name: pstrain-job"));
  EXPECT_THAT(kustomization, HasSubstr("- fashion_mnist.json"));
  const std::string copy = ReadFile(absl::StrCat(kK8sDir, "/fashion_mnist.json"));
  const std::string example = FindExample(kExampleJob);
  if (example.empty()) GTEST_SKIP() << "cannot reach " << kExampleJob << " from the sandbox";
  EXPECT_EQ(copy, ReadFile(example))
      << "deploy/k8s/fashion_mnist.json must be a copy of " << kExampleJob;
}

TEST(K8sTest, KubectlKustomizeRenders) {
  const std::string kubectl = FindProgram("kubectl");
  if (kubectl.empty()) GTEST_SKIP() << "kubectl is not installed; `kubectl kustomize` not run";
  std::string output;
  // Runfiles are symlinks out of this folder, which kustomize's default restrictor refuses.
  const int rc = RunCommand(
      absl::StrCat(kubectl, " kustomize --load-restrictor=LoadRestrictionsNone ", kK8sDir),
      &output);
  if (rc != 0 && absl::StrContains(output, "unknown flag")) {
    // kubectl before 1.21 (Debian's kubernetes-client is 1.20) has no --load-restrictor.
    GTEST_SKIP() << "this kubectl's kustomize is too old: " << output;
  }
  ASSERT_EQ(rc, 0) << output;
  std::map<std::string, int> kinds;
  for (const std::string& line : Lines(output)) {
    std::string kind;
    if (Indent(line) == 0 && KeyValue(line, "kind", &kind)) ++kinds[kind];
  }
  EXPECT_EQ(kinds["Job"], 6);  // five tasks and the evaluator
  EXPECT_EQ(kinds["Service"], 5);
  EXPECT_EQ(kinds["ConfigMap"], 1);
  EXPECT_EQ(kinds["PersistentVolumeClaim"], 1);
  EXPECT_THAT(output, HasSubstr("image: pstrain:latest"));
  // Every task reads the job's auth token from the Secret (authorization is on by default).
  EXPECT_EQ(Occurrences(output, "secretKeyRef:"), 5);
  EXPECT_EQ(Occurrences(output, "name: pstrain-auth"), 5);
}

// The mutual-TLS overlay: every Job gets the TLS flags, its own certificate's Secret and
// its probes on the plaintext health port.
TEST(K8sTest, TheTlsOverlayGivesEveryTaskItsOwnCertificate) {
  const std::string kubectl = FindProgram("kubectl");
  if (kubectl.empty()) GTEST_SKIP() << "kubectl is not installed; `kubectl kustomize` not run";
  std::string output;
  const int rc = RunCommand(
      absl::StrCat(kubectl, " kustomize --load-restrictor=LoadRestrictionsNone deploy/k8s-tls"),
      &output);
  if (rc != 0 && absl::StrContains(output, "unknown flag")) {
    GTEST_SKIP() << "this kubectl's kustomize is too old: " << output;
  }
  ASSERT_EQ(rc, 0) << output;
  EXPECT_EQ(Occurrences(output, "- --tls_dir=/etc/pstrain/tls"), 5);
  EXPECT_EQ(Occurrences(output, "- --health_port=2223"), 5);
  EXPECT_EQ(Occurrences(output, "port: 2223"), 10);  // readiness and liveness, each Job
  for (const char* task : {"chief-0", "ps-0", "ps-1", "worker-0", "worker-1"}) {
    EXPECT_EQ(Occurrences(output, absl::StrCat("secretName: pstrain-tls-", task, "\n")), 1) << task;
  }
  EXPECT_EQ(Occurrences(output, "mountPath: /etc/pstrain/tls"), 5);
  // The evaluator as deploy/k8s has it: nothing of TLS, no probes to move.
  std::vector<std::string> evaluator;
  for (const auto& doc : Documents(output)) {
    if (NestedValue(doc, "metadata", "name") == "pstrain-evaluator-0") evaluator = doc;
  }
  ASSERT_FALSE(evaluator.empty()) << output;
  const std::string text = absl::StrJoin(evaluator, "\n");
  EXPECT_THAT(text, testing::Not(HasSubstr("tls")));
  EXPECT_THAT(text, testing::Not(HasSubstr("2223")));
  EXPECT_THAT(text, testing::Not(HasSubstr("Probe")));
}

// ---- Kubeflow TFJob --------------------------------------------------------------------

struct ReplicaSpec {
  int replicas = -1;
  std::vector<std::string> lines;
};

TEST(KubeflowTest, TfJobHasChiefTwoPsTwoWorkers) {
  // The TFJob, and the PersistentVolumeClaim for the chief's checkpoints before it.
  std::vector<std::string> doc;
  int claims = 0;
  for (const auto& d : Documents(ReadFile(kTfJob))) {
    if (Kind(d) == "TFJob") {
      EXPECT_TRUE(doc.empty()) << "two TFJobs";
      doc = d;
    } else if (Kind(d) == "PersistentVolumeClaim") {
      ++claims;
      ExpectClaim(d, "pstrain-fashion-mnist-checkpoints");
    } else {
      ADD_FAILURE() << "unexpected kind " << Kind(d);
    }
  }
  EXPECT_EQ(claims, 1);
  ASSERT_FALSE(doc.empty()) << "no TFJob";
  std::string api, kind;
  for (const std::string& line : doc) {
    if (Indent(line) != 0) continue;
    KeyValue(line, "apiVersion", &api);
    KeyValue(line, "kind", &kind);
  }
  EXPECT_EQ(api, "kubeflow.org/v1");
  EXPECT_EQ(kind, "TFJob");
  const std::string job_name = NestedValue(doc, "metadata", "name");
  EXPECT_EQ(NestedValue(doc, "runPolicy", "cleanPodPolicy", 2), "Running");

  // tfReplicaSpecs at indent 2; each replica type at indent 4.
  std::map<std::string, ReplicaSpec> specs;
  std::string current;
  bool in_specs = false;
  for (const std::string& line : doc) {
    if (Indent(line) <= 2) {
      in_specs = Trimmed(line) == "tfReplicaSpecs:";
      current.clear();
      continue;
    }
    if (!in_specs) continue;
    if (Indent(line) == 4) {
      current = std::string(absl::StripSuffix(Trimmed(line), ":"));
      continue;
    }
    specs[current].lines.push_back(line);
    std::string value;
    if (Indent(line) == 6 && KeyValue(line, "replicas", &value)) {
      EXPECT_TRUE(absl::SimpleAtoi(value, &specs[current].replicas)) << value;
    }
  }
  std::map<std::string, int> counts;
  for (const auto& [type, spec] : specs) counts[type] = spec.replicas;
  EXPECT_THAT(counts, UnorderedElementsAre(testing::Pair("Chief", 1), testing::Pair("PS", 2),
                                           testing::Pair("Worker", 2),
                                           testing::Pair("Evaluator", 1)));

  // What the training operator will set: job names are the replica types in lower case,
  // hosts <tfjob>-<type>-<index>.<namespace>.svc, the port of "tfjob-port"; the evaluator
  // is left out of the cluster (TF's rule, and the operator's).
  std::vector<std::pair<std::string, std::vector<std::string>>> jobs;
  for (const auto& [type, spec] : specs) {
    if (type == "Evaluator") continue;
    std::vector<std::string> addresses;
    for (int i = 0; i < spec.replicas; ++i) {
      addresses.push_back(
          absl::StrCat(job_name, "-", absl::AsciiStrToLower(type), "-", i, ".default.svc:2222"));
    }
    jobs.push_back({absl::AsciiStrToLower(type), addresses});
  }
  absl::StatusOr<ClusterSpec> cluster = ClusterSpec::Create(jobs);
  ASSERT_TRUE(cluster.ok()) << cluster.status();

  const std::set<std::string> binaries = ImageBinaries();
  for (const auto& [type, spec] : specs) {
    SCOPED_TRACE(type);
    EXPECT_THAT(AllValues(spec.lines, "restartPolicy"), ElementsAre("OnFailure"));
    if (type == "Evaluator") {
      // The chief binary under the operator's TF_CONFIG (task type evaluator): the claim
      // read-only, its metrics port, and no RPC port, probe or token.
      EXPECT_THAT(AllValues(spec.lines, "name"),
                  ElementsAre("tensorflow", "OPENBLAS_NUM_THREADS", "metrics", "checkpoints",
                              "checkpoints"));
      ExpectCheckpointVolume(spec.lines, "pstrain-fashion-mnist-checkpoints", Access::kReadOnly);
      EXPECT_THAT(AllValues(spec.lines, "containerPort"), ElementsAre(kMetricsPort));
      EXPECT_THAT(AllValues(spec.lines, "port"), testing::IsEmpty());
      EXPECT_THAT(AllValues(spec.lines, "grpc"), testing::IsEmpty());
      ExpectScrapeAnnotations(spec.lines);
      EXPECT_TRUE(EnvValues(spec.lines, "TF_CONFIG").empty()) << "the operator sets TF_CONFIG";
      ExpectOpenBlasThreadsFromCpuLimit(spec.lines);
      const std::vector<std::string> commands = AllValues(spec.lines, "command");
      ASSERT_EQ(commands.size(), 1u);
      ASSERT_TRUE(specs.count("Chief"));
      const std::vector<std::string> chief_commands = AllValues(specs.at("Chief").lines, "command");
      ASSERT_EQ(chief_commands.size(), 1u);
      ExpectEvaluatorCommand(FlowList(commands[0]), FlowList(chief_commands[0]));
      ExpectEvaluatorTfConfig(
          type,
          absl::StrCat("{\"cluster\":", cluster->ToJson(),
                       ",\"task\":{\"type\":\"evaluator\",\"index\":0},\"environment\":\"cloud\"}"),
          cluster->ToJson());
      continue;
    }
    // The operator sets TF_CONFIG in the container named "tensorflow" and takes the port
    // from the one named "tfjob-port".
    if (type == "Chief" || type == "PS") {
      // ... and the chief and the ps mount the checkpoint volume (each ps its shards).
      // Every task reads the job's auth token from the Secret pstrain-auth.
      EXPECT_THAT(AllValues(spec.lines, "name"),
                  ElementsAre("tensorflow", "PSTRAIN_AUTH_TOKEN", "pstrain-auth",
                              "OPENBLAS_NUM_THREADS", "tfjob-port", "metrics", "checkpoints",
                              "checkpoints"));
      ExpectCheckpointVolume(spec.lines, "pstrain-fashion-mnist-checkpoints");
    } else {
      EXPECT_THAT(AllValues(spec.lines, "name"),
                  ElementsAre("tensorflow", "PSTRAIN_AUTH_TOKEN", "pstrain-auth",
                              "OPENBLAS_NUM_THREADS", "tfjob-port", "metrics"));
      EXPECT_THAT(AllValues(spec.lines, "mountPath"), testing::IsEmpty());
    }
    EXPECT_THAT(AllValues(spec.lines, "containerPort"), ElementsAre("2222", kMetricsPort));
    EXPECT_THAT(AllValues(spec.lines, "port"), ElementsAre("2222"));  // liveness, gRPC
    ExpectScrapeAnnotations(spec.lines);
    EXPECT_TRUE(EnvValues(spec.lines, "TF_CONFIG").empty()) << "the operator sets TF_CONFIG";
    ExpectOpenBlasThreadsFromCpuLimit(spec.lines);
    const std::vector<std::string> commands = AllValues(spec.lines, "command");
    ASSERT_EQ(commands.size(), 1u);
    const std::vector<std::string> command = FlowList(commands[0]);
    ASSERT_FALSE(command.empty());
    EXPECT_TRUE(binaries.count(command[0])) << command[0] << " not in image";
    const std::string task_type = absl::AsciiStrToLower(type);
    EXPECT_EQ(command[0], task_type == "ps" ? "ps_server" : task_type);
    ExpectFaultToleranceFlags(task_type, command);
    ExpectMetricsFlags(command);
    if (task_type == "chief") {
      EXPECT_THAT(command, testing::Contains("--job=/opt/pstrain/examples/fashion_mnist.json"));
    }
    for (int i = 0; i < spec.replicas; ++i) {
      const TfConfig config = MustParse(
          type, absl::StrCat("{\"cluster\":", cluster->ToJson(), ",\"task\":{\"type\":\"",
                             task_type, "\",\"index\":", i, "},\"environment\":\"cloud\"}"));
      EXPECT_EQ(RoleName(config.task.type), task_type);
    }
  }
}

TEST(KubeflowTest, SaysWhichOperatorRunsIt) {
  // Kubeflow Trainer v2 has no TFJob: the file must say it needs Training Operator v1.
  const std::string tfjob = ReadFile(kTfJob);
  EXPECT_THAT(tfjob, HasSubstr("Training Operator v1"));
  EXPECT_THAT(tfjob, HasSubstr("github.com/kubeflow/training-operator"));
  EXPECT_THAT(tfjob, HasSubstr("Trainer v2"));
}

// The TFJob's mutual-TLS overlay: every replica type gets the TLS flags, its tasks'
// certificates (and no other type's) from their Secrets, and its liveness probe on the
// plaintext health port.
TEST(KubeflowTest, TheTlsOverlayGivesEveryReplicaTypeItsTasksCertificates) {
  const std::string kubectl = FindProgram("kubectl");
  if (kubectl.empty()) GTEST_SKIP() << "kubectl is not installed; `kubectl kustomize` not run";
  std::string output;
  const int rc = RunCommand(
      absl::StrCat(kubectl, " kustomize --load-restrictor=LoadRestrictionsNone deploy/kubeflow-tls"),
      &output);
  if (rc != 0 && absl::StrContains(output, "unknown flag")) {
    GTEST_SKIP() << "this kubectl's kustomize is too old: " << output;
  }
  ASSERT_EQ(rc, 0) << output;
  EXPECT_EQ(Occurrences(output, "kind: TFJob"), 1);
  EXPECT_EQ(Occurrences(output, "kind: PersistentVolumeClaim"), 1);
  // Each replica type's part of the rendered TFJob, from its key under tfReplicaSpecs (in
  // kustomize's order, by name). The evaluator has no task of the cluster to certify: it
  // serves and calls no RPC, and the overlay leaves it alone.
  const std::vector<std::pair<std::string, std::vector<std::string>>> types = {
      {"Chief", {"chief-0"}},
      {"Evaluator", {}},
      {"PS", {"ps-0", "ps-1"}},
      {"Worker", {"worker-0", "worker-1"}}};
  std::map<std::string, std::string> part;
  for (size_t i = 0; i < types.size(); ++i) {
    const size_t begin = output.find(absl::StrCat("\n    ", types[i].first, ":\n"));
    ASSERT_NE(begin, std::string::npos) << types[i].first << "\n" << output;
    // Up to and with the newline before the next type's key.
    const size_t end = i + 1 < types.size()
                           ? output.find(absl::StrCat("\n    ", types[i + 1].first, ":\n")) + 1
                           : output.size();
    part[types[i].first] = output.substr(begin, end - begin);
  }
  for (const auto& [type, tasks] : types) {
    SCOPED_TRACE(type);
    const std::string& spec = part[type];
    const int tls = tasks.empty() ? 0 : 1;  // 1 for a replica type of the cluster
    EXPECT_EQ(Occurrences(spec, "- --tls_dir=/etc/pstrain/tls\n"), tls);
    EXPECT_EQ(Occurrences(spec, "- --health_port=2223\n"), tls);
    EXPECT_EQ(Occurrences(spec, "port: 2223\n"), tls);  // the liveness probe
    EXPECT_EQ(Occurrences(spec, "port: 2222\n"), 0);
    EXPECT_EQ(Occurrences(spec, "mountPath: /etc/pstrain/tls\n"), tls);
    EXPECT_EQ(Occurrences(spec, "path: ca.crt\n"), tls);
    EXPECT_EQ(Occurrences(spec, "name: pstrain-fashion-mnist-tls-"), static_cast<int>(tasks.size()));
    for (const auto& [other_type, other_tasks] : types) {
      for (const std::string& task : other_tasks) {
        // Its own tasks' certificate and key, and none of another type's.
        const int expected = other_type == type ? 1 : 0;
        EXPECT_EQ(Occurrences(spec, absl::StrCat("name: pstrain-fashion-mnist-tls-", task, "\n")),
                  expected)
            << task;
        EXPECT_EQ(Occurrences(spec, absl::StrCat("path: ", task, ".key\n")), expected) << task;
        EXPECT_EQ(Occurrences(spec, absl::StrCat("path: ", task, ".crt\n")), expected) << task;
      }
    }
    // The certificates are readable by the daemon's group (the image's user, 10001).
    EXPECT_EQ(Occurrences(spec, "fsGroup: 10001\n"), tls);
  }
}

// ---- Dockerfile ------------------------------------------------------------------------

TEST(DockerfileTest, TwoStagesOnBookwormNonRootRuntime) {
  const std::string dockerfile = ReadFile(kDockerfile);
  EXPECT_THAT(dockerfile, HasSubstr("FROM debian:bookworm AS build"));
  EXPECT_THAT(dockerfile, HasSubstr("FROM debian:bookworm-slim AS runtime"));
  EXPECT_THAT(ImageBinaries(), UnorderedElementsAre("ps_server", "worker", "chief", "psctl",
                                                   "evaluate", "export_safetensors"));
  for (const char* package : {"libgrpc++1.51", "libprotobuf32", "libabsl20220623",
                              "libopenblas0-pthread", "zlib1g", "libprometheus-cpp-pull1.0",
                              "libhdf5-103-1", "libzip4",
                              "dataset-fashion-mnist"}) {
    EXPECT_THAT(dockerfile, HasSubstr(package));
  }
  EXPECT_THAT(dockerfile, HasSubstr("COPY --from=build /out/bin/ /usr/local/bin/"));
  EXPECT_THAT(dockerfile, HasSubstr("COPY examples/ /opt/pstrain/examples/"));
  std::string user;
  for (const std::string& line : Lines(dockerfile)) {
    // No ENTRYPOINT: the command names the daemon.
    EXPECT_FALSE(absl::StartsWith(line, "ENTRYPOINT")) << line;
    if (absl::StartsWith(line, "USER ")) user = Trimmed(line.substr(5));
  }
  EXPECT_FALSE(user.empty()) << "no USER";
  EXPECT_FALSE(absl::StartsWith(user, "0") || absl::StartsWith(user, "root")) << user;
  // The uid the Kubernetes manifests ask for (runAsNonRoot needs a numeric USER).
  EXPECT_THAT(user, testing::StartsWith("10001"));
}

TEST(DockerfileTest, CreatesTheCheckpointFolderOwnedByTheUser) {
  // The runtime stage's RUN commands, continuation lines joined.
  const std::string dockerfile = ReadFile(kDockerfile);
  const std::string runtime =
      dockerfile.substr(dockerfile.find("FROM debian:bookworm-slim AS runtime"));
  const std::string joined = absl::StrReplaceAll(runtime, {{"\\\n", " "}});
  bool created = false;
  for (const std::string& line : Lines(joined)) {
    if (!absl::StartsWith(line, "RUN ")) continue;
    for (absl::string_view command : absl::StrSplit(line.substr(4), absl::ByAnyChar(";&"))) {
      const std::string c = Trimmed(std::string(command));
      if (!absl::StrContains(c, kCheckpointDir)) continue;
      // install -d -o 10001 -g 10001 DIR, or chown 10001:10001 DIR after a mkdir.
      if ((absl::StartsWith(c, "install -d") && absl::StrContains(c, "-o 10001") &&
           absl::StrContains(c, "-g 10001")) ||
          (absl::StartsWith(c, "chown") && absl::StrContains(c, "10001:10001"))) {
        created = true;
      }
    }
  }
  EXPECT_TRUE(created) << "the runtime stage must create " << kCheckpointDir
                       << " owned by 10001:10001 (a fresh named volume takes that owner)";
}

TEST(DockerfileTest, NamesNoFrontendToPull) {
  // "# syntax=docker/dockerfile:1" makes BuildKit pull a frontend image: no registry here.
  for (const std::string& line : Lines(ReadFile(kDockerfile))) {
    std::string t = absl::AsciiStrToLower(absl::StrReplaceAll(line, {{" ", ""}}));
    EXPECT_FALSE(absl::StartsWith(t, "#syntax=")) << line;
  }
}

TEST(DockerfileTest, RuntimeStageHasNoBuildTools) {
  const std::string runtime = RuntimeStage();
  EXPECT_THAT(runtime, testing::Not(HasSubstr("COPY . "))) << "sources in the final image";
  bool installs = false;
  for (const std::string& line : Lines(runtime)) {
    const size_t install = line.find("apt-get install");
    if (!absl::StartsWith(line, "RUN ") || install == std::string::npos) continue;
    installs = true;
    std::string packages = line.substr(install);
    packages = packages.substr(0, packages.find(';'));
    for (absl::string_view word : absl::StrSplit(packages, ' ', absl::SkipEmpty())) {
      EXPECT_FALSE(absl::EndsWith(word, "-dev")) << word;
      for (const char* tool : {"g++", "gcc", "clang", "make", "cmake", "build-essential",
                               "bazel-bootstrap", "protobuf-compiler"}) {
        EXPECT_NE(word, tool);
      }
    }
  }
  EXPECT_TRUE(installs) << "no apt-get install in the runtime stage";
}

TEST(DockerfileTest, HealthcheckAsksTheDaemonWithPsctl) {
  const std::string runtime = RuntimeStage();
  std::string healthcheck;
  for (const std::string& line : Lines(runtime)) {
    if (absl::StartsWith(line, "HEALTHCHECK ")) healthcheck = line;
  }
  ASSERT_FALSE(healthcheck.empty()) << "no HEALTHCHECK";
  EXPECT_THAT(healthcheck, HasSubstr("CMD [\"psctl\", \"health\""));
  EXPECT_TRUE(ImageBinaries().count("psctl"));
  // Its own --timeout under the HEALTHCHECK's, so psctl reports rather than being killed.
  EXPECT_THAT(healthcheck, HasSubstr("--timeout=5s"));
  EXPECT_THAT(healthcheck, HasSubstr("--timeout=4s"));
}

TEST(DockerfileTest, OpenBlasDefaultsToOneThread) {
  EXPECT_THAT(RuntimeStage(), HasSubstr("ENV OPENBLAS_NUM_THREADS=1"));
}

TEST(DockerfileTest, BuildContextLeavesOutGitAndBazelOutputs) {
  // The classic builder reads only <context>/.dockerignore, BuildKit also
  // <Dockerfile>.dockerignore, which would then win: one list, at the top.
  const std::string root = SourceRoot();
  if (root.empty()) GTEST_SKIP() << "cannot reach the checkout from the sandbox";
  const std::string ignore = ReadFile(root + "/.dockerignore");
  const std::vector<std::string> lines = Lines(ignore);
  EXPECT_THAT(lines, testing::Contains(".git"));
  EXPECT_THAT(lines, testing::Contains("bazel-*"));
  // What the image needs is not left out.
  for (const char* needed : {"/examples", "examples", "/tools", "/common", "/proto",
                             "/third_party", "/WORKSPACE", "/.bazelrc"}) {
    EXPECT_THAT(lines, testing::Not(testing::Contains(needed)));
  }
  struct stat st;
  EXPECT_NE(stat((root + "/" + kDockerfile + ".dockerignore").c_str(), &st), 0)
      << "a Dockerfile.dockerignore beside the Dockerfile would replace .dockerignore for BuildKit";
}

}  // namespace
}  // namespace pstrain
