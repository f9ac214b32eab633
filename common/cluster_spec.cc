#include "common/cluster_spec.h"

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using Json = nlohmann::json;
using JobList = std::vector<std::pair<std::string, std::vector<std::string>>>;

constexpr char kChief[] = "chief";
constexpr char kMaster[] = "master";
constexpr char kEvaluator[] = "evaluator";

// Job names as written in TF_CONFIG; "master" is the chief under its old name.
bool IsKnownJobName(absl::string_view name) {
  return name == kChief || name == kMaster || name == "worker" || name == "ps" ||
         name == kEvaluator;
}

std::string NormaliseJob(absl::string_view name) {
  return name == kMaster ? std::string(kChief) : std::string(name);
}

absl::Status Invalid(absl::string_view prefix, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(prefix, message));
}

// Quoted for messages; long or odd values are cut so an error stays one short line.
std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, 80)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (s.size() > 80) out += "...";
  out += "\"";
  return out;
}

bool IsHostnameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

bool IsIpv6Char(char c) {
  // Hex digits, separators, an embedded IPv4 tail, and a zone id after '%'.
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == ':' || c == '.' || c == '%' ||
         c == '-' || c == '_';
}

// Checks "host:port" (or "[v6]:port"). Returns "" when good, else why not.
std::string AddressProblem(absl::string_view address) {
  absl::string_view host;
  absl::string_view port;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) return "has no closing ']'";
    host = address.substr(1, close - 1);
    absl::string_view rest = address.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return "is not [host]:port";
    port = rest.substr(1);
    if (host.empty() || host.find(':') == absl::string_view::npos) {
      return "has brackets but no IPv6 host";
    }
    for (char c : host) {
      if (!IsIpv6Char(c)) return "has a bad character in its IPv6 host";
    }
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) return "is not host:port";
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.empty()) return "has an empty host";
    if (host.find(':') != absl::string_view::npos) {
      return "is not host:port (write IPv6 hosts in brackets: [::1]:port)";
    }
    for (char c : host) {
      if (!IsHostnameChar(c)) return "has a bad character in its host";
    }
  }
  if (port.empty() || port.size() > 5) return "has no valid port (want 1-65535)";
  int value = 0;
  for (char c : port) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return "has no valid port (want 1-65535)";
    }
    value = value * 10 + (c - '0');
  }
  if (value < 1 || value > 65535) return "has a port out of range (want 1-65535)";
  return "";
}

// Every rule of a cluster, shared by ClusterSpec::Create, ParseTfConfig and the flags form so
// each reports with its own prefix.
absl::Status ValidateJobs(const JobList& jobs, absl::string_view prefix) {
  std::set<std::string> seen_jobs;
  std::map<std::string, std::string> address_owner;  // address -> "job:index"
  int total = 0;
  for (const auto& [name, addresses] : jobs) {
    if (!IsKnownJobName(name)) {
      return Invalid(prefix, absl::StrCat("unknown job ", Quote(name),
                                          " in cluster (want chief, master, worker, ps or "
                                          "evaluator)"));
    }
    if (!seen_jobs.insert(name).second) {
      return Invalid(prefix, absl::StrCat("job ", Quote(name), " is given twice"));
    }
    if (addresses.empty()) continue;
    const std::string normalised = NormaliseJob(name);
    if (name != normalised && seen_jobs.count(normalised) > 0) {
      return Invalid(prefix, "cluster has both \"chief\" and \"master\" (they are one job)");
    }
    if (name == kChief && seen_jobs.count(kMaster) > 0) {
      return Invalid(prefix, "cluster has both \"chief\" and \"master\" (they are one job)");
    }
    if ((normalised == kChief || normalised == kEvaluator) && addresses.size() > 1) {
      return Invalid(prefix, absl::StrCat("job ", Quote(name), " has ", addresses.size(),
                                          " tasks (at most one is allowed)"));
    }
    for (size_t i = 0; i < addresses.size(); ++i) {
      const std::string task = absl::StrCat(name, ":", i);
      const std::string problem = AddressProblem(addresses[i]);
      if (!problem.empty()) {
        return Invalid(
            prefix, absl::StrCat("address ", Quote(addresses[i]), " of task ", task, " ", problem));
      }
      auto [it, inserted] = address_owner.emplace(addresses[i], task);
      if (!inserted) {
        return Invalid(prefix, absl::StrCat("address ", Quote(addresses[i]), " is used by both ",
                                            it->second, " and ", task));
      }
      ++total;
    }
  }
  if (total == 0) return Invalid(prefix, "cluster is empty");
  return absl::OkStatus();
}

// The task named by `type` (a TF_CONFIG task type, "master" for the chief) and `index`,
// checked against a validated cluster.
absl::StatusOr<TaskId> ValidateTask(const ClusterSpec& cluster, absl::string_view type, int index,
                                    absl::string_view prefix) {
  if (!IsKnownJobName(type)) {
    return Invalid(prefix, absl::StrCat("unknown task type ", Quote(type),
                                        " (want chief, master, worker, ps or evaluator)"));
  }
  TaskId task;
  PS_ASSIGN_OR_RETURN(task.type, RoleFromTaskType(type));
  task.index = index;
  const std::string job(RoleName(task.type));
  if (task.index < 0) {
    return Invalid(prefix, absl::StrCat("task index ", task.index, " is negative"));
  }
  if (!cluster.has_job(task.type)) {
    // TF runs the evaluator beside the cluster: it need not be listed in it.
    if (task.type == Role::kEvaluator) {
      if (task.index != 0) {
        return Invalid(prefix, absl::StrCat("task index ", task.index,
                                            " out of range for job \"evaluator\" (1 task)"));
      }
      return task;
    }
    return Invalid(prefix, absl::StrCat("task type ", Quote(job),
                                        " is not a job of the cluster (jobs: ",
                                        absl::StrJoin(cluster.jobs(), ", "), ")"));
  }
  const int n = cluster.num_tasks(task.type);
  if (task.index >= n) {
    return Invalid(prefix, absl::StrCat("task index ", task.index, " out of range for job ",
                                        Quote(job), " (", n, n == 1 ? " task)" : " tasks)"));
  }
  return task;
}

// Records the byte offset of the first syntax error; nlohmann's non-throwing parse() does
// not report where it failed, and "at byte N" is what a user needs to fix a hand-written
// TF_CONFIG.
class ErrorPositionSax : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    position_ = position;
    return false;
  }
  size_t position() const { return position_; }

 private:
  size_t position_ = 0;
};

absl::StatusOr<int> ParseIndex(const Json& value, absl::string_view prefix) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(kMax)) {
      return Invalid(prefix, absl::StrCat("task index ", v, " is too large"));
    }
    return static_cast<int>(v);
  }
  if (value.is_number_integer()) {
    const int64_t v = value.get<int64_t>();
    if (v < 0) return Invalid(prefix, absl::StrCat("task index ", v, " is negative"));
    if (v > kMax) return Invalid(prefix, absl::StrCat("task index ", v, " is too large"));
    return static_cast<int>(v);
  }
  if (value.is_string()) {
    // Kubeflow and shell-written configs quote the index.
    const std::string& s = value.get_ref<const std::string&>();
    int64_t v = 0;
    bool digits = !s.empty() && s.size() <= 10;
    for (char c : s) digits = digits && absl::ascii_isdigit(static_cast<unsigned char>(c));
    if (!digits || !absl::SimpleAtoi(s, &v) || v > kMax) {
      return Invalid(prefix,
                     absl::StrCat("task index ", Quote(s), " is not a non-negative integer"));
    }
    return static_cast<int>(v);
  }
  return Invalid(prefix, absl::StrCat("task index must be an integer or a string of digits, "
                                      "not ",
                                      value.type_name()));
}

// One job's addresses from a list ["h:1", ...] or a sparse spec {"0": "h:1", ...}.
absl::StatusOr<std::vector<std::string>> ParseJobAddresses(const std::string& job,
                                                           const Json& value,
                                                           absl::string_view prefix) {
  std::vector<std::string> addresses;
  if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      if (!value[i].is_string()) {
        return Invalid(prefix, absl::StrCat("task ", job, ":", i, " address must be a string, not ",
                                            value[i].type_name()));
      }
      addresses.push_back(value[i].get<std::string>());
    }
    return addresses;
  }
  if (value.is_object()) {
    std::map<int64_t, std::string> by_index;
    for (auto it = value.begin(); it != value.end(); ++it) {
      const std::string& key = it.key();
      int64_t index = -1;
      bool digits = !key.empty() && key.size() <= 9;
      for (char c : key) digits = digits && absl::ascii_isdigit(static_cast<unsigned char>(c));
      if (!digits || !absl::SimpleAtoi(key, &index)) {
        return Invalid(
            prefix, absl::StrCat("job ", Quote(job), " key ", Quote(key), " is not a task index"));
      }
      if (!it.value().is_string()) {
        return Invalid(prefix,
                       absl::StrCat("task ", job, ":", key, " address must be a string, not ",
                                    it.value().type_name()));
      }
      if (!by_index.emplace(index, it.value().get<std::string>()).second) {
        return Invalid(prefix, absl::StrCat("job ", Quote(job), " gives task ", index, " twice"));
      }
    }
    // A sparse spec is only usable here when it names every task: a missing index would
    // leave a hole that no address can fill.
    int64_t expected = 0;
    for (auto& [index, address] : by_index) {
      if (index != expected) {
        return Invalid(prefix, absl::StrCat("job ", Quote(job), " has no task ", expected,
                                            " (indices must be 0..", by_index.size() - 1, ")"));
      }
      addresses.push_back(std::move(address));
      ++expected;
    }
    return addresses;
  }
  return Invalid(prefix, absl::StrCat("job ", Quote(job),
                                      " must be a list of addresses or an object of index: "
                                      "address, not ",
                                      value.type_name()));
}

absl::StatusOr<std::string> OptionalString(const Json& object, const char* key,
                                           absl::string_view prefix) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::string();
  if (!it->is_string()) {
    return Invalid(prefix, absl::StrCat("\"", key, "\" must be a string, not ", it->type_name()));
  }
  return it->get<std::string>();
}

}  // namespace

bool operator==(const TaskId& a, const TaskId& b) { return a.type == b.type && a.index == b.index; }

std::string TaskIdToString(const TaskId& task) {
  return absl::StrCat(RoleName(task.type), ":", task.index);
}

const std::vector<std::string>& ClusterSpec::KnownJobs() {
  static const auto* const kJobs = new std::vector<std::string>{kChief, "worker", "ps", kEvaluator};
  return *kJobs;
}

absl::StatusOr<ClusterSpec> ClusterSpec::Create(const JobList& jobs) {
  PS_RETURN_IF_ERROR(ValidateJobs(jobs, "cluster spec: "));
  ClusterSpec spec;
  for (const auto& [name, addresses] : jobs) {
    if (addresses.empty()) continue;
    if (name == kMaster) spec.chief_named_master_ = true;
    spec.jobs_[NormaliseJob(name)] = addresses;
  }
  return spec;
}

const std::vector<std::string>& ClusterSpec::TasksOfJob(absl::string_view job) const {
  static const auto* const kNone = new std::vector<std::string>();
  auto it = jobs_.find(NormaliseJob(job));
  return it == jobs_.end() ? *kNone : it->second;
}

const std::vector<std::string>& ClusterSpec::tasks(Role role) const {
  return TasksOfJob(RoleName(role));
}

int ClusterSpec::num_tasks(Role role) const { return static_cast<int>(tasks(role).size()); }

bool ClusterSpec::has_job(Role role) const { return !tasks(role).empty(); }

std::vector<std::string> ClusterSpec::jobs() const {
  std::vector<std::string> names;
  for (const std::string& job : KnownJobs()) {
    if (jobs_.count(job) > 0) names.push_back(job);
  }
  return names;
}

int ClusterSpec::total_tasks() const {
  int total = 0;
  for (const auto& [job, addresses] : jobs_) total += static_cast<int>(addresses.size());
  return total;
}

absl::StatusOr<std::string> ClusterSpec::address(const TaskId& task) const {
  const absl::string_view job = RoleName(task.type);
  if (!IsKnownJobName(job)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown job ", Quote(job), " in task ", TaskIdToString(task)));
  }
  if (task.index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", TaskIdToString(task), " has a negative index"));
  }
  const std::vector<std::string>& addresses = tasks(task.type);
  if (addresses.empty()) {
    return absl::NotFoundError(absl::StrCat("task ", TaskIdToString(task), ": no job ",
                                            Quote(job), " in the cluster"));
  }
  if (task.index >= static_cast<int>(addresses.size())) {
    return absl::NotFoundError(absl::StrCat("task ", TaskIdToString(task), " not in cluster (",
                                            "job ", Quote(job), " has ", addresses.size(),
                                            " tasks)"));
  }
  return addresses[task.index];
}

std::string ClusterSpec::ToJson() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const std::string& job : KnownJobs()) {
    auto it = jobs_.find(job);
    if (it == jobs_.end()) continue;
    const std::string key = (job == kChief && chief_named_master_) ? kMaster : job;
    out[key] = it->second;
  }
  // Addresses were validated as ASCII, but never let dump() throw on odd bytes.
  return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json_text) {
  constexpr absl::string_view kPrefix = "TF_CONFIG: ";
  const Json root = Json::parse(json_text.begin(), json_text.end(), nullptr,
                                /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    ErrorPositionSax sax;
    Json::sax_parse(json_text.begin(), json_text.end(), &sax);
    // nlohmann counts characters read, so the offending byte is the last one read.
    const size_t offset = sax.position() > 0 ? sax.position() - 1 : 0;
    return Invalid(kPrefix, absl::StrCat("not valid JSON at byte ", offset));
  }
  if (!root.is_object()) {
    return Invalid(kPrefix, absl::StrCat("must be a JSON object, not ", root.type_name()));
  }

  auto cluster_it = root.find("cluster");
  if (cluster_it == root.end() || cluster_it->is_null()) {
    return Invalid(kPrefix, "missing \"cluster\"");
  }
  if (!cluster_it->is_object()) {
    return Invalid(kPrefix, absl::StrCat("\"cluster\" must be an object of job: addresses, not ",
                                         cluster_it->type_name()));
  }
  for (auto it = cluster_it->begin(); it != cluster_it->end(); ++it) {
    if (!IsKnownJobName(it.key())) {
      return Invalid(kPrefix, absl::StrCat("unknown job ", Quote(it.key()),
                                           " in cluster (want chief, master, worker, ps or "
                                           "evaluator)"));
    }
  }
  // JSON objects are unordered; visiting jobs in TF's order keeps messages (e.g. which of
  // two tasks is named first for a duplicate address) stable.
  JobList jobs;
  for (const char* job : {kChief, kMaster, "worker", "ps", kEvaluator}) {
    auto it = cluster_it->find(job);
    if (it == cluster_it->end()) continue;
    PS_ASSIGN_OR_RETURN(std::vector<std::string> addresses, ParseJobAddresses(job, *it, kPrefix));
    jobs.emplace_back(job, std::move(addresses));
  }
  PS_RETURN_IF_ERROR(ValidateJobs(jobs, kPrefix));
  TfConfig config;
  PS_ASSIGN_OR_RETURN(config.cluster, ClusterSpec::Create(jobs));

  auto task_it = root.find("task");
  if (task_it == root.end() || task_it->is_null()) return Invalid(kPrefix, "missing \"task\"");
  if (!task_it->is_object()) {
    return Invalid(kPrefix, absl::StrCat("\"task\" must be an object, not ", task_it->type_name()));
  }
  auto type_it = task_it->find("type");
  if (type_it == task_it->end() || type_it->is_null()) {
    return Invalid(kPrefix, "missing task \"type\"");
  }
  if (!type_it->is_string()) {
    return Invalid(kPrefix,
                   absl::StrCat("task \"type\" must be a string, not ", type_it->type_name()));
  }
  const std::string& type = type_it->get_ref<const std::string&>();
  auto index_it = task_it->find("index");
  // TF reads a missing index as 0.
  int index = 0;
  if (index_it != task_it->end() && !index_it->is_null()) {
    PS_ASSIGN_OR_RETURN(index, ParseIndex(*index_it, kPrefix));
  }
  PS_ASSIGN_OR_RETURN(config.task, ValidateTask(config.cluster, type, index, kPrefix));

  PS_ASSIGN_OR_RETURN(config.environment, OptionalString(root, "environment", kPrefix));
  PS_ASSIGN_OR_RETURN(config.rpc_layer, OptionalString(root, "rpc_layer", kPrefix));
  return config;
}

absl::StatusOr<TfConfig> TfConfigFromFlags(const std::string& cluster_flag,
                                           const std::string& task_type, int task_index) {
  constexpr absl::string_view kPrefix = "cluster flags: ";
  JobList jobs;
  for (absl::string_view part : absl::StrSplit(cluster_flag, ';', absl::SkipWhitespace())) {
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos) {
      return Invalid(kPrefix, absl::StrCat(Quote(absl::StripAsciiWhitespace(part)),
                                           " is not job=host:port,..."));
    }
    const std::string job(absl::StripAsciiWhitespace(part.substr(0, eq)));
    if (job.empty()) {
      return Invalid(kPrefix,
                     absl::StrCat(Quote(absl::StripAsciiWhitespace(part)), " has no job name"));
    }
    std::vector<std::string> addresses;
    for (absl::string_view address : absl::StrSplit(part.substr(eq + 1), ',')) {
      address = absl::StripAsciiWhitespace(address);
      if (address.empty()) {
        return Invalid(kPrefix, absl::StrCat("job ", Quote(job), " has an empty address"));
      }
      addresses.emplace_back(address);
    }
    jobs.emplace_back(job, std::move(addresses));
  }
  PS_RETURN_IF_ERROR(ValidateJobs(jobs, kPrefix));
  TfConfig config;
  PS_ASSIGN_OR_RETURN(config.cluster, ClusterSpec::Create(jobs));
  PS_ASSIGN_OR_RETURN(config.task, ValidateTask(config.cluster, task_type, task_index, kPrefix));
  return config;
}

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kChief:
      return kChief;
    case Role::kWorker:
      return "worker";
    case Role::kPs:
      return "ps";
    case Role::kEvaluator:
      return kEvaluator;
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

absl::StatusOr<Role> RoleFromTaskType(absl::string_view type) {
  if (type == kChief || type == kMaster) return Role::kChief;
  if (type == "worker") return Role::kWorker;
  if (type == "ps") return Role::kPs;
  if (type == kEvaluator) return Role::kEvaluator;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown task type ", Quote(type.substr(0, 64)), " (expected chief, worker, ps or evaluator)"));
}

absl::StatusOr<TfConfig> TfConfigFromEnvironment() {
  const char* text = std::getenv("TF_CONFIG");
  if (text == nullptr || *text == '\0') return absl::NotFoundError("TF_CONFIG is not set");
  return ParseTfConfig(text);
}

std::string TfConfigToJson(const TfConfig& config) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["cluster"] = nlohmann::ordered_json::parse(config.cluster.ToJson(), nullptr, false);
  const bool as_master = config.task.type == Role::kChief && config.cluster.chief_named_master();
  out["task"] = {{"type", std::string(as_master ? kMaster : RoleName(config.task.type))},
                 {"index", config.task.index}};
  if (!config.environment.empty()) out["environment"] = config.environment;
  if (!config.rpc_layer.empty()) out["rpc_layer"] = config.rpc_layer;
  return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace pstrain
