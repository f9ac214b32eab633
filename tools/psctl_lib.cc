#include "tools/psctl_lib.h"

#include <algorithm>
#include <cstdint>
#include <memory>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "common/cluster_spec.h"
#include "common/daemon/rpc/grpc_chief_client.h"
#include "common/daemon/daemon_options.h"
#include "common/daemon/daemon_security.h"
#include "common/rpc/client_security.h"
#include "common/rpc/grpc_util.h"
#include "proto/health.grpc.pb.h"
#include "common/sharding/shard_layout.h"
#include "common/tensor.h"
#include "common/version.h"
#include "common/training/consistency_config.h"
#include "distribute/job_phase.h"
#include "ps_server/rpc/grpc_ps_client.h"

namespace pstrain {
namespace {

constexpr char kUsage[] =
    "usage: psctl status --chief=HOST:PORT [--timeout=5s] [--json]\n"
    "                    [--watch [--interval=2s] [--count=N]]\n"
    "       psctl layout --chief=HOST:PORT [--timeout=5s] [--json]\n"
    "       psctl ps --address=HOST:PORT [--timeout=5s] [--json]\n"
    "       psctl checkpoint --chief=HOST:PORT [--timeout=60s] [--json]\n"
    "       psctl health [--address=HOST:PORT] [--timeout=5s]\n"
    "       psctl --version\n"
    "Every command sends the job's auth token, from --auth_token_file=FILE or the\n"
    "PSTRAIN_AUTH_TOKEN environment variable, as the \"admin\" role (status, ps,\n"
    "checkpoint; the daemons refuse it training's own calls). With mutual TLS:\n"
    "--tls_dir=DIR (ca.crt, admin.crt, admin.key; tools/make_certs.sh) or --tls_ca,\n"
    "--tls_cert, --tls_key. health without --address asks this task's own daemon:\n"
    "localhost:PSTRAIN_HEALTH_PORT (its plaintext --health_port) when that is set, else\n"
    "the port of its TF_CONFIG address on localhost.\n";

// The message as one line of JSON (protobuf's JSON mapping, proto field names, zeros and
// empty fields included so a reader finds every key).
std::string ToJsonLine(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json + "\n";
}

// A positive duration: "500ms", "5s", or a number of seconds.
absl::Status ParsePositiveDuration(const std::string& flag, const std::string& value,
                                   absl::Duration* duration) {
  double seconds = 0;
  if (absl::ParseDuration(value, duration)) {
  } else if (absl::SimpleAtod(value, &seconds)) {
    *duration = absl::Seconds(seconds);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", value, " is not a duration (e.g. 500ms, 5s)"));
  }
  if (*duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, "=", value, " must be > 0"));
  }
  return absl::OkStatus();
}

std::vector<int64_t> ToVector(const google::protobuf::RepeatedField<int64_t>& field) {
  return std::vector<int64_t>(field.begin(), field.end());
}

// Left-aligned columns, two spaces apart; every line indented by `indent`.
std::string Table(const std::vector<std::vector<std::string>>& rows, const std::string& indent) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string text;
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t c = 0; c < row.size(); ++c) {
      absl::StrAppend(&line, row[c]);
      if (c + 1 < row.size()) line.append(width[c] - row[c].size() + 2, ' ');
    }
    absl::StrAppend(&text, line, "\n");
  }
  return text;
}

// A status message on one line, without the client's own "peer: " prefix (the caller
// names the peer by the address the user typed).
std::string OneLine(const absl::Status& status, const std::string& peer_prefix) {
  std::string message(status.message());
  if (absl::StartsWith(message, peer_prefix)) message = message.substr(peer_prefix.size());
  message = absl::StrReplaceAll(message, {{"\r", " "}, {"\n", " "}});
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", message);
}

struct Flags {
  std::string command;
  std::string chief;
  std::string address;
  SecurityFlags security;
  absl::Duration timeout = absl::Seconds(5);
  bool timeout_given = false;
  bool help = false;
  bool json = false;
  bool watch = false;
  absl::Duration interval = absl::Seconds(2);
  int64_t count = 0;  // --watch: refreshes at most (0: until the job ends)
  bool version = false;
};

// The field of `security` that `arg` ("--tls_dir=...") sets; null for another flag.
std::string* SecurityFileFlag(const std::string& arg, SecurityFlags* security) {
  for (auto [name, field] : {std::pair<const char*, std::string*>{"--auth_token_file=",
                                                                  &security->auth_token_file},
                             {"--tls_dir=", &security->tls_dir},
                             {"--tls_ca=", &security->tls_ca},
                             {"--tls_cert=", &security->tls_cert},
                             {"--tls_key=", &security->tls_key}}) {
    if (absl::StartsWith(arg, name)) return field;
  }
  return nullptr;
}

// Errors: a one-line message for the usage error.
absl::Status ParseArgs(const std::vector<std::string>& args, Flags* flags) {
  for (const std::string& arg : args) {
    if (arg == "-h" || arg == "--help" || arg == "help") {
      flags->help = true;
    } else if (arg == "--version" || arg == "version") {
      flags->version = true;
    } else if (absl::StartsWith(arg, "--chief=")) {
      flags->chief = arg.substr(8);
    } else if (absl::StartsWith(arg, "--address=")) {
      flags->address = arg.substr(10);
    } else if (std::string* file = SecurityFileFlag(arg, &flags->security)) {
      *file = arg.substr(arg.find('=') + 1);
      if (file->empty()) {
        return absl::InvalidArgumentError(absl::StrCat(arg, " needs a file"));
      }
    } else if (absl::StartsWith(arg, "--timeout=")) {
      PS_RETURN_IF_ERROR(ParsePositiveDuration("--timeout", arg.substr(10), &flags->timeout));
      flags->timeout_given = true;
    } else if (arg == "--json") {
      flags->json = true;
    } else if (arg == "--watch") {
      flags->watch = true;
    } else if (absl::StartsWith(arg, "--interval=")) {
      PS_RETURN_IF_ERROR(ParsePositiveDuration("--interval", arg.substr(11), &flags->interval));
    } else if (absl::StartsWith(arg, "--count=")) {
      if (!absl::SimpleAtoi(arg.substr(8), &flags->count) || flags->count < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(arg, ": the number of refreshes must be a whole number >= 1"));
      }
    } else if (absl::StartsWith(arg, "-")) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
    } else if (flags->command.empty()) {
      flags->command = arg;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument ", arg));
    }
  }
  if (flags->help || flags->version) return absl::OkStatus();
  if (flags->command.empty()) return absl::InvalidArgumentError("no command given");
  if (flags->command == "status" || flags->command == "layout" ||
      flags->command == "checkpoint") {
    if (flags->chief.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(flags->command, " needs --chief=HOST:PORT"));
    }
  } else if (flags->command == "ps") {
    if (flags->address.empty()) {
      return absl::InvalidArgumentError("ps needs --address=HOST:PORT");
    }
  } else if (flags->command == "health") {
    if (flags->json || flags->watch) {
      return absl::InvalidArgumentError("health takes neither --json nor --watch");
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown command \"", flags->command, "\""));
  }
  if (flags->watch && flags->command != "status") {
    return absl::InvalidArgumentError("--watch is for psctl status");
  }
  return absl::OkStatus();
}

}  // namespace

std::string FormatLayoutTable(const std::vector<VariablePlacementEntry>& placement) {
  std::vector<std::vector<std::string>> rows = {{"variable", "shard", "ps", "rows", "shape"}};
  for (const VariablePlacementEntry& raw : placement) {
    // Entries from before partitioning describe a whole variable.
    const VariablePlacementEntry e = NormalizedEntry(raw);
    const std::vector<int64_t> full = ToVector(e.full_shape());
    const int64_t total = full.empty() ? 1 : full[0];
    const int64_t first = e.row_offset();
    const int64_t count = e.num_rows();
    rows.push_back({e.variable_name(), e.name(), absl::StrCat(e.ps_index()),
                    count == 0 ? absl::StrCat("-/", total)
                               : absl::StrCat(first, "-", first + count - 1, "/", total),
                    ShapeToString(ToVector(e.shape()))});
  }
  return Table(rows, "");
}

namespace {

// "512.0MiB" (one word, so a script splits a row on spaces), or "-" when not known (0).
std::string MemoryText(int64_t bytes) {
  if (bytes <= 0) return "-";
  return absl::StrFormat("%.1fMiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

std::string FormatChiefStatus(const ChiefStatusResponse& status) {
  // The enum, or an older chief's phase name; a phase this psctl does not know is shown
  // as the chief spelled it.
  const absl::StatusOr<distribute::JobPhase> phase = distribute::PhaseOf(status);
  const std::string phase_text =
      phase.ok() ? std::string(distribute::JobPhaseName(*phase))
                 : absl::StrCat(status.phase_name().empty() ? "unknown" : status.phase_name(),
                                " (phase ", static_cast<int>(status.phase()), ")");
  std::string text = absl::StrCat("phase: ", phase_text, "\nepoch: ", status.epoch(),
                                  "\nglobal step: ", status.global_step(), "\ntasks:\n");
  // Memory as the tasks' heartbeats reported it, the chief's as it answered: what each
  // task holds now and the most it held (README "Large embeddings on the parameter
  // servers" says what that should be).
  std::vector<std::vector<std::string>> tasks = {
      {"type", "index", "address", "registered", "last heartbeat", "memory", "peak memory"}};
  tasks.push_back({"chief", "0", "-", "yes", "-", MemoryText(status.chief_resident_memory_bytes()),
                   MemoryText(status.chief_peak_resident_memory_bytes())});
  for (const TaskState& t : status.tasks()) {
    tasks.push_back({t.task_type(), absl::StrCat(t.task_index()), t.address(),
                     t.registered() ? "yes" : "no",
                     t.registered() ? absl::StrCat(t.last_heartbeat_age_ms(), "ms ago") : "-",
                     MemoryText(t.resident_memory_bytes()),
                     MemoryText(t.peak_resident_memory_bytes())});
  }
  absl::StrAppend(&text, Table(tasks, "  "), "layout:\n");
  if (status.placement().empty()) {
    absl::StrAppend(&text, "  (no variables placed yet)\n");
  } else {
    std::string layout = FormatLayoutTable({status.placement().begin(), status.placement().end()});
    absl::StrAppend(&text, "  ", absl::StrReplaceAll(layout, {{"\n", "\n  "}}));
    text.resize(text.size() - 2);  // the indent after the last newline
  }
  return text;
}

std::string FormatPsStatus(const std::string& address, const PsStatusResponse& status) {
  std::string text = absl::StrCat("ps ", address, ": optimizer ",
                                  status.optimizer().empty() ? "(none)" : status.optimizer(),
                                  ", ", status.pushes(), " pushes, ", status.pulls(), " pulls, ",
                                  status.variables_size(), " variables\n");
  // Async never waits; the other modes say how often a straggler held a push to the end.
  if (status.consistency_mode() != CONSISTENCY_ASYNC) {
    absl::StrAppend(&text, "consistency ", ConsistencyModeName(status.consistency_mode()), ": ",
                    status.consistency_timeouts(), " waits ended at the timeout");
    if (status.consistency_mode() == CONSISTENCY_SYNC) {
      absl::StrAppend(&text, ", ", status.stale_gradients(), " stale gradients dropped");
    }
    absl::StrAppend(&text, "\n");
    if (status.consistency_mode() == CONSISTENCY_SYNC) {
      absl::StrAppend(&text, "sync updates: ", status.sync_full_updates(), " full, ",
                      status.sync_partial_updates(), " partial, averaging ",
                      status.sync_aggregated_gradients(), " gradients\n");
    } else {
      absl::StrAppend(&text, "bounded staleness: ", status.consistency_waits(),
                      " pushes waited, largest lead applied ", status.max_staleness_applied(),
                      " steps\n");
    }
  }
  // Refused or dropped input shows only when there was some.
  if (status.nonfinite_refused() + status.nonfinite_skipped() + status.duplicate_pushes() +
          status.limit_refusals() + status.streams_cancelled() >
      0) {
    absl::StrAppend(&text, "refused: ", status.nonfinite_refused(), " non-finite, ",
                    status.nonfinite_skipped(), " non-finite pushes skipped, ",
                    status.duplicate_pushes(), " retried pushes not reapplied, ",
                    status.limit_refusals(), " over a limit, ", status.streams_cancelled(),
                    " streams cancelled\n");
  }
  std::vector<const VariableInfo*> sorted;
  for (const VariableInfo& v : status.variables()) sorted.push_back(&v);
  std::sort(sorted.begin(), sorted.end(),
            [](const VariableInfo* a, const VariableInfo* b) { return a->name() < b->name(); });
  std::vector<std::vector<std::string>> rows = {{"variable", "shape", "version"}};
  for (const VariableInfo* v : sorted) {
    rows.push_back({v->name(), ShapeToString(ToVector(v->shape())), absl::StrCat(v->version())});
  }
  absl::StrAppend(&text, Table(rows, "  "));
  if (status.workers_size() > 0) {
    std::vector<std::vector<std::string>> pushers = {{"pushed by", "pushes", "latest epoch",
                                                      "latest step"}};
    for (const WorkerPushes& w : status.workers()) {
      pushers.push_back({w.worker().empty() ? "(unnamed)" : w.worker(), absl::StrCat(w.pushes()),
                         absl::StrCat(w.epoch() + 1), absl::StrCat(w.step())});
    }
    absl::StrAppend(&text, Table(pushers, "  "));
  }
  return text;
}

namespace {

// psctl status --watch: the status every interval until the job is over (phase done or
// failed), --count refreshes, or the chief stops answering (exit 1, named).
int WatchStatus(const Flags& flags, std::ostream& out, std::ostream& err, bool terminal) {
  std::unique_ptr<ChiefClient> chief = CreateGrpcChiefClient(flags.chief, flags.timeout);
  for (int64_t n = 1;; ++n) {
    absl::StatusOr<ChiefStatusResponse> status = chief->GetStatus();
    if (!status.ok()) {
      err << "psctl: chief at " << flags.chief << ": "
          << OneLine(status.status(), chief->name() + ": ") << "\n";
      return kPsctlUnreachable;
    }
    if (flags.json) {
      out << ToJsonLine(*status);
    } else {
      // A terminal shows the latest status alone, as watch(1) does; a pipe gets each one
      // after a dated separator.
      out << (terminal ? "\033[H\033[2J"
                       : absl::StrCat("--- ", absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::Now(),
                                                               absl::LocalTimeZone()),
                                      "\n"))
          << FormatChiefStatus(*status);
    }
    out.flush();
    // A phase this psctl does not know (a newer chief's) is not the end: keep watching.
    if (absl::StatusOr<distribute::JobPhase> phase = distribute::PhaseOf(*status);
        phase.ok() && distribute::IsFinal(*phase)) {
      return kPsctlOk;
    }
    if (flags.count > 0 && n >= flags.count) return kPsctlOk;
    absl::SleepFor(flags.interval);
  }
}

// psctl health without --address: this task's own daemon, as the container image's
// HEALTHCHECK asks it. That is localhost:PSTRAIN_HEALTH_PORT when that is set (the
// daemon's --health_port, common/daemon/daemon_options.h), else the port of the task's
// address in TF_CONFIG, on localhost
// (the daemon listens on every interface when its address is not a loopback one), or the
// address itself when it is a loopback one.
// Errors: NotFound (TF_CONFIG is not set), InvalidArgument (it does not parse).
absl::StatusOr<std::string> OwnHealthAddress() {
  // The daemon's plaintext health-only port when PSTRAIN_HEALTH_PORT gives it one: its
  // own port may speak mutual TLS, and the HEALTHCHECK has no certificate.
  PS_ASSIGN_OR_RETURN(const int health_port, HealthPortFromEnvironment());
  if (health_port > 0) return absl::StrCat("localhost:", health_port);
  PS_ASSIGN_OR_RETURN(TfConfig config, TfConfigFromEnvironment());
  PS_ASSIGN_OR_RETURN(std::string own, config.cluster.address(config.task));
  const size_t colon = own.rfind(':');
  const std::string host = own.substr(0, colon);
  if (host == "localhost" || host == "[::1]" || absl::StartsWith(host, "127.")) return own;
  return absl::StrCat("localhost", own.substr(colon));
}

// psctl health: exit 0 when the daemon answers grpc.health.v1 Check with SERVING, 1 when it
// answers anything else (NOT_SERVING while it shuts down) or does not answer in --timeout,
// 2 when there is no address to ask. Prints "ADDRESS: STATUS".
int CheckHealth(const Flags& flags, std::ostream& out, std::ostream& err) {
  std::string address = flags.address;
  if (address.empty()) {
    absl::StatusOr<std::string> own = OwnHealthAddress();
    if (!own.ok()) {
      err << "psctl: health: no --address=HOST:PORT, and no own address: "
          << own.status().message() << "\n";
      return kPsctlUsage;
    }
    address = *own;
  }
  std::unique_ptr<grpc::health::v1::Health::Stub> health =
      grpc::health::v1::Health::NewStub(CreateChannel(address));
  grpc::ClientContext context;
  SetTimeout(&context, flags.timeout);
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  const absl::Status status =
      FromGrpcStatus(health->Check(&context, request, &response), address);
  if (!status.ok()) {
    err << "psctl: health of " << address << ": " << OneLine(status, address + ": ") << "\n";
    return kPsctlUnreachable;
  }
  out << address << ": "
      << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()) << "\n";
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING
             ? kPsctlOk
             : kPsctlUnreachable;
}

}  // namespace

int RunPsctl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
             bool terminal) {
  Flags flags;
  if (absl::Status parsed = ParseArgs(args, &flags); !parsed.ok()) {
    err << "psctl: " << parsed.message() << "\n" << kUsage;
    return kPsctlUsage;
  }
  if (flags.help) {
    out << kUsage;
    return kPsctlOk;
  }
  if (flags.version) {
    out << VersionText("psctl");
    return kPsctlOk;
  }
  // Every channel made from here on uses them (common/rpc/client_security.h), until
  // psctl returns.
  absl::StatusOr<ClientSecurity> client =
      ClientSecurityFromFlags(flags.security, {Role::kAdmin, 0});
  if (!client.ok()) {
    err << "psctl: " << client.status().message() << "\n";
    return kPsctlUsage;
  }
  // As a task of the job does, psctl prints and acts on no answer from a server that does
  // not prove it holds the token (a process at a task's address that is not of the job):
  // UNAUTHENTICATED, named by the address. Health is open to all, and a health-only port
  // proves nothing.
  client->require_server_proof = flags.command != "health";
  const ClientSecurity before = GetClientSecurity();
  SetClientSecurity(*std::move(client));
  absl::Cleanup restore = [&before] { SetClientSecurity(before); };
  if (flags.command == "health") return CheckHealth(flags, out, err);
  if (flags.command == "ps") {
    std::unique_ptr<PsClient> ps = CreateGrpcPsClient(0, flags.address, flags.timeout);
    absl::StatusOr<PsStatusResponse> status = ps->GetStatus();
    if (!status.ok()) {
      err << "psctl: ps at " << flags.address << ": "
          << OneLine(status.status(), ps->name() + ": ") << "\n";
      return kPsctlUnreachable;
    }
    out << (flags.json ? ToJsonLine(*status) : FormatPsStatus(flags.address, *status));
    return kPsctlOk;
  }
  if (flags.command == "checkpoint") {
    // A consistent checkpoint waits for the chunks in flight: allow more than a status.
    std::unique_ptr<ChiefClient> chief = CreateGrpcChiefClient(
        flags.chief, flags.timeout_given ? flags.timeout : absl::Seconds(60));
    absl::StatusOr<SaveCheckpointResponse> saved = chief->SaveCheckpoint();
    if (!saved.ok()) {
      err << "psctl: chief at " << flags.chief << ": "
          << OneLine(saved.status(), chief->name() + ": ") << "\n";
      return kPsctlUnreachable;
    }
    if (flags.json) {
      out << ToJsonLine(*saved);
    } else {
      out << "checkpoint " << saved->path() << " (step " << saved->step() << ", "
          << saved->epoch() << " epochs done)\n";
    }
    return kPsctlOk;
  }
  if (flags.watch) return WatchStatus(flags, out, err, terminal);
  std::unique_ptr<ChiefClient> chief = CreateGrpcChiefClient(flags.chief, flags.timeout);
  absl::StatusOr<ChiefStatusResponse> status = chief->GetStatus();
  if (!status.ok()) {
    err << "psctl: chief at " << flags.chief << ": "
        << OneLine(status.status(), chief->name() + ": ") << "\n";
    return kPsctlUnreachable;
  }
  if (flags.command == "layout") {
    if (flags.json) {
      ChiefStatusResponse layout;
      *layout.mutable_placement() = status->placement();
      out << ToJsonLine(layout);
    } else {
      out << FormatLayoutTable({status->placement().begin(), status->placement().end()});
    }
    return kPsctlOk;
  }
  out << (flags.json ? ToJsonLine(*status) : FormatChiefStatus(*status));
  return kPsctlOk;
}

}  // namespace pstrain
