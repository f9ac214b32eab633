// psctl against a real chief service and a real ps service on free ports: what a user
// sees from `psctl status|layout|ps`, and the exit codes for unreachable tasks and bad
// usage.

#include "tools/psctl_lib.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "chief/membership.h"
#include "distribute/job_phase.h"
#include "chief/rpc/chief_service.h"
#include "common/cluster_spec.h"
#include "common/rpc/call_authorizer.h"
#include "common/rpc/client_security.h"
#include "common/rpc/grpc_util.h"
#include "common/sharding/placement.h"
#include "deploy/local/free_port.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ps_server/rpc/ps_service.h"
#include "ps_server/variable_store.h"

namespace pstrain {
namespace {

struct Result {
  int code;
  std::string out;
  std::string err;
};

// A server of the job: psctl acts only on answers that prove they come from one.
ServerOptions OfTheJob(ServerOptions options) {
  const char* token = std::getenv(kAuthTokenEnvironmentVariable);
  options.credentials = AuthorizingServerCredentials(
      std::make_shared<CallAuthorizer>(token != nullptr ? token : ""));
  return options;
}

Result RunArgs(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunPsctl(args, out, err);
  return {code, out.str(), err.str()};
}

class PsctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A ps holding the shards the chief placed on ps 0.
    auto ps = StartServer(OfTheJob({"127.0.0.1:0", {&ps_service_}}));
    ASSERT_TRUE(ps.ok()) << ps.status();
    ps_server_ = std::move(ps->server);
    ps_address_ = absl::StrCat("127.0.0.1:", ps->port);

    PlacementPolicy policy;
    policy.strategy = PlacementStrategy::kRoundRobin;
    policy.num_shards = 2;
    auto placement = PlaceVariables({{"dense/kernel", {5, 3}}, {"dense/bias", {3}}}, 2, policy);
    ASSERT_TRUE(placement.ok());
    placement_ = *placement;
    std::vector<NamedTensor> on_ps0;
    for (const auto& e : placement_) {
      if (e.ps_index() == 0) {
        on_ps0.push_back({e.name(), Tensor(std::vector<int64_t>(e.shape().begin(), e.shape().end()))});
      }
    }
    OptimizerConfig sgd;
    sgd.set_name("sgd");
    sgd.set_learning_rate(0.1f);
    ASSERT_TRUE(store_.CreateVariables(on_ps0, sgd).ok());

    // A chief whose cluster has that ps (registered) and a worker (not yet).
    auto cluster = ClusterSpec::Create({{"chief", {"127.0.0.1:1"}},
                                        {"ps", {ps_address_, "127.0.0.1:3"}},
                                        {"worker", {"127.0.0.1:2"}}});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    membership_ = std::make_unique<Membership>(*cluster);
    ASSERT_TRUE(membership_->Register({Role::kPs, 0}, ps_address_, 42).ok());
    chief_service_ = std::make_unique<ChiefServiceImpl>(
        membership_.get(), "{}", "/", [this](ChiefStatusResponse* response) {
          const int call = ++status_calls_;
          const distribute::JobPhase phase = done_at_call_ > 0 && call >= done_at_call_
                                                 ? distribute::JobPhase::kDone
                                                 : distribute::JobPhase::kTraining;
          if (older_chief_) {
            // A chief from before the enum: the phase's name in field 1 alone.
            response->set_phase_name(std::string(distribute::JobPhaseName(phase)));
          } else {
            distribute::SetPhase(phase, response);
          }
          response->set_epoch(3);
          response->set_global_step(1234);
          for (const auto& e : placement_) *response->add_placement() = e;
        });
    auto chief = StartServer(OfTheJob({"127.0.0.1:0", {chief_service_.get()}}));
    ASSERT_TRUE(chief.ok()) << chief.status();
    chief_server_ = std::move(chief->server);
    chief_address_ = absl::StrCat("127.0.0.1:", chief->port);
  }

  void TearDown() override {
    if (chief_server_) chief_server_->Shutdown();
    if (ps_server_) ps_server_->Shutdown();
  }

  VariableStore store_;
  PsServiceImpl ps_service_{&store_, [](const std::string&) {}};
  std::unique_ptr<grpc::Server> ps_server_;
  std::string ps_address_;
  std::vector<VariablePlacementEntry> placement_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<ChiefServiceImpl> chief_service_;
  std::unique_ptr<grpc::Server> chief_server_;
  std::string chief_address_;
  std::atomic<int> status_calls_{0};
  int done_at_call_ = 0;  // > 0: the status says "done" from this call on
  std::atomic<bool> older_chief_{false};  // answer as a chief older than the phase enum
};

// Every line of `text` parsed as JSON.
std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    lines.push_back(nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false));
  }
  return lines;
}

TEST_F(PsctlTest, JsonOnEveryCommandIsOneObjectPerAnswer) {
  Result status = RunArgs({"status", "--chief=" + chief_address_, "--json"});
  ASSERT_EQ(status.code, 0) << status.err;
  std::vector<nlohmann::json> lines = JsonLines(status.out);
  ASSERT_EQ(lines.size(), 1u) << status.out;
  // The enum (protobuf's JSON spells its value's name) and the words older readers read.
  EXPECT_EQ(lines[0]["phase"], "TRAINING");
  EXPECT_EQ(lines[0]["phase_name"], "training");
  EXPECT_EQ(lines[0]["epoch"], 3);
  EXPECT_EQ(lines[0]["global_step"], "1234");  // int64 is a string in protobuf's JSON
  ASSERT_EQ(lines[0]["placement"].size(), placement_.size());
  EXPECT_EQ(lines[0]["placement"][1]["name"], placement_[1].name());
  bool ps0_registered = false;
  for (const nlohmann::json& task : lines[0]["tasks"]) {
    if (task["task_type"] == "ps" && task["task_index"] == 0) {
      ps0_registered = task["registered"] == true && task["address"] == ps_address_;
    }
  }
  EXPECT_TRUE(ps0_registered) << status.out;

  Result layout = RunArgs({"layout", "--chief=" + chief_address_, "--json"});
  ASSERT_EQ(layout.code, 0) << layout.err;
  lines = JsonLines(layout.out);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["placement"].size(), placement_.size());
  EXPECT_EQ(lines[0]["placement"][0]["ps_index"], placement_[0].ps_index());

  Result ps = RunArgs({"ps", "--address=" + ps_address_, "--json"});
  ASSERT_EQ(ps.code, 0) << ps.err;
  lines = JsonLines(ps.out);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["optimizer"], "sgd");
  std::vector<std::string> names;
  for (const nlohmann::json& v : lines[0]["variables"]) names.push_back(v["name"]);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"dense/bias/part_0", "dense/kernel/part_0"}));
  EXPECT_EQ(lines[0]["pushes"], "0");
}

TEST_F(PsctlTest, WatchRepeatsTheStatusUntilTheJobIsDone) {
  done_at_call_ = 3;
  Result r = RunArgs({"status", "--chief=" + chief_address_, "--watch", "--interval=20ms"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(status_calls_.load(), 3);
  // Each status after a dated separator; the last one says done.
  size_t separators = 0;
  for (size_t at = r.out.find("--- 20"); at != std::string::npos; at = r.out.find("--- 20", at + 1)) {
    ++separators;
  }
  EXPECT_EQ(separators, 3u) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "phase: done")) << r.out;

  // As JSON: one object per refresh, ending with the done one.
  status_calls_ = 0;
  Result json = RunArgs({"status", "--chief=" + chief_address_, "--watch", "--json",
                         "--interval=20ms"});
  ASSERT_EQ(json.code, 0) << json.err;
  const std::vector<nlohmann::json> lines = JsonLines(json.out);
  ASSERT_EQ(lines.size(), 3u) << json.out;
  EXPECT_EQ(lines[0]["phase"], "TRAINING");
  EXPECT_EQ(lines[2]["phase"], "DONE");
}

// A chief from before the phase enum sends only the phase's name: psctl shows it and
// stops watching at its "done" all the same.
TEST_F(PsctlTest, AnOlderChiefsPhaseIsReadFromItsName) {
  older_chief_ = true;
  done_at_call_ = 2;
  Result r = RunArgs({"status", "--chief=" + chief_address_, "--watch", "--interval=20ms"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(status_calls_.load(), 2);
  EXPECT_TRUE(absl::StrContains(r.out, "phase: training\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "phase: done\n")) << r.out;
}

TEST_F(PsctlTest, WatchStopsAfterCountRefreshesAndRedrawsATerminal) {
  std::ostringstream out, err;
  const int code = RunPsctl(
      {"status", "--chief=" + chief_address_, "--watch", "--count=2", "--interval=10ms"}, out,
      err, /*terminal=*/true);
  ASSERT_EQ(code, 0) << err.str();
  EXPECT_EQ(status_calls_.load(), 2);
  const std::string text = out.str();
  size_t clears = 0;
  for (size_t at = text.find("\033[2J"); at != std::string::npos; at = text.find("\033[2J", at + 1)) {
    ++clears;
  }
  EXPECT_EQ(clears, 2u);
}

TEST_F(PsctlTest, WatchNamesAChiefThatStopsAnswering) {
  chief_server_->Shutdown();
  chief_server_.reset();
  Result r = RunArgs({"status", "--chief=" + chief_address_, "--watch", "--timeout=1s"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, chief_address_)) << r.err;
}

TEST_F(PsctlTest, StatusShowsProgressTasksAndLayout) {
  Result r = RunArgs({"status", "--chief=" + chief_address_});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "phase: training")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "epoch: 3")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "global step: 1234")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, ps_address_)) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "worker")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "dense/kernel/part_1")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "variable")) << r.out;
}

// Every task's memory is a column: the tasks' as their last heartbeat reported it, the
// chief's its own (this process's) at the call; a task that has not said is "-".
TEST_F(PsctlTest, StatusShowsEveryTasksMemory) {
  ASSERT_TRUE(
      membership_->Heartbeat({Role::kPs, 0}, 42, {int64_t{300} << 20, int64_t{1536} << 20}).ok());

  Result r = RunArgs({"status", "--chief=" + chief_address_});
  ASSERT_EQ(r.code, 0) << r.err;
  std::map<std::string, std::vector<std::string>> rows;  // "ps 0" -> its fields
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() >= 2) rows[fields[0] + " " + fields[1]] = fields;
  }
  ASSERT_FALSE(rows["type index"].empty()) << r.out;  // the tasks table's header
  EXPECT_EQ(rows["type index"].back(), "memory") << r.out;  // "... memory peak memory"
  ASSERT_EQ(rows["ps 0"].size(), 8u) << r.out;  // "12ms ago" is two words
  EXPECT_EQ(rows["ps 0"][6], "300.0MiB") << r.out;
  EXPECT_EQ(rows["ps 0"][7], "1536.0MiB") << r.out;
  ASSERT_EQ(rows["worker 0"].size(), 7u) << r.out;
  EXPECT_EQ(rows["worker 0"][5], "-") << r.out;  // not registered: nothing reported
  ASSERT_EQ(rows["chief 0"].size(), 7u) << r.out;
  double chief_mib = 0;
  ASSERT_TRUE(absl::SimpleAtod(absl::StripSuffix(rows["chief 0"][6], "MiB"), &chief_mib))
      << r.out;
  EXPECT_GT(chief_mib, 0) << r.out;

  Result json = RunArgs({"status", "--chief=" + chief_address_, "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  std::vector<nlohmann::json> lines = JsonLines(json.out);
  ASSERT_EQ(lines.size(), 1u) << json.out;
  int64_t chief_peak = 0;
  ASSERT_TRUE(absl::SimpleAtoi(lines[0]["chief_peak_resident_memory_bytes"].get<std::string>(),
                               &chief_peak))
      << json.out;
  EXPECT_GT(chief_peak, 0);
  for (const nlohmann::json& task : lines[0]["tasks"]) {
    if (task["task_type"] == "ps" && task["task_index"] == 0) {
      EXPECT_EQ(task["peak_resident_memory_bytes"], absl::StrCat(int64_t{1536} << 20));
    }
  }
}

TEST_F(PsctlTest, LayoutPrintsOneRowPerShard) {
  Result r = RunArgs({"layout", "--chief=" + chief_address_, "--timeout=2s"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(absl::StrContains(r.out, "phase")) << r.out;
  // Header + 2 kernel shards + 2 bias shards.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 5) << r.out;
  // dense/kernel [5,3] split in two: rows 0-2 on ps 0, rows 3-4 on ps 1.
  EXPECT_TRUE(absl::StrContains(r.out, "dense/kernel  dense/kernel/part_0  0   0-2/5  [3,3]"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "dense/kernel  dense/kernel/part_1  1   3-4/5  [2,3]"))
      << r.out;
  // Read back as a user's script would: every row's rows column and shape agree, and each
  // variable's shards cover its rows exactly once, in order.
  std::map<std::string, int64_t> next_row;
  std::map<std::string, int64_t> total_rows;
  int rows = 0;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    ASSERT_EQ(fields.size(), 5u) << line;
    if (fields[0] == "variable") continue;  // the header
    ++rows;
    int64_t first = 0, last = 0, total = 0, shape_rows = 0;
    const std::vector<std::string> span = absl::StrSplit(fields[3], absl::ByAnyChar("-/"));
    ASSERT_EQ(span.size(), 3u) << line;
    ASSERT_TRUE(absl::SimpleAtoi(span[0], &first) && absl::SimpleAtoi(span[1], &last) &&
                absl::SimpleAtoi(span[2], &total))
        << line;
    ASSERT_TRUE(absl::SimpleAtoi(fields[4].substr(1, fields[4].find_first_of(",]") - 1),
                                 &shape_rows))
        << line;
    EXPECT_EQ(shape_rows, last - first + 1) << line;
    EXPECT_EQ(first, next_row[fields[0]]) << line;
    EXPECT_TRUE(absl::StartsWith(fields[1], fields[0] + "/part_")) << line;
    next_row[fields[0]] = last + 1;
    total_rows[fields[0]] = total;
  }
  EXPECT_EQ(rows, 4);
  EXPECT_EQ(next_row, total_rows);
  EXPECT_EQ(total_rows, (std::map<std::string, int64_t>{{"dense/bias", 3}, {"dense/kernel", 5}}));
}

TEST_F(PsctlTest, PsListsTheShardsItHolds) {
  Result r = RunArgs({"ps", "--address=" + ps_address_});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "optimizer sgd")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "dense/kernel/part_0")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "dense/bias/part_0")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "part_1")) << r.out;  // those are on ps 1
}

TEST(PsctlFormatTest, PsStatusShowsConsistencyWaitsOutsideAsync) {
  PsStatusResponse status;
  status.set_optimizer("sgd");
  status.set_consistency_mode(CONSISTENCY_ASYNC);
  EXPECT_FALSE(absl::StrContains(FormatPsStatus("h:1", status), "consistency")) << status.DebugString();
  status.set_consistency_mode(CONSISTENCY_SYNC);
  status.set_consistency_timeouts(3);
  status.set_stale_gradients(7);
  status.set_sync_full_updates(40);
  status.set_sync_partial_updates(2);
  status.set_sync_aggregated_gradients(81);
  WorkerPushes* pusher = status.add_workers();
  pusher->set_worker("worker 1");
  pusher->set_pushes(21);
  pusher->set_epoch(2);
  pusher->set_step(6);
  const std::string text = FormatPsStatus("h:1", status);
  EXPECT_TRUE(absl::StrContains(
      text, "consistency sync: 3 waits ended at the timeout, 7 stale gradients dropped\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "sync updates: 40 full, 2 partial, averaging 81 gradients\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "  worker 1   21      3             6\n")) << text;
  status.set_consistency_mode(CONSISTENCY_BOUNDED_STALENESS);
  status.set_consistency_waits(5);
  status.set_max_staleness_applied(2);
  const std::string bounded = FormatPsStatus("h:1", status);
  EXPECT_TRUE(absl::StrContains(
      bounded, "bounded staleness: 5 pushes waited, largest lead applied 2 steps\n"))
      << bounded;
}

TEST(PsctlFormatTest, PsStatusShowsRefusedInputOnlyWhenThereWasSome) {
  PsStatusResponse status;
  status.set_optimizer("adam");
  EXPECT_FALSE(absl::StrContains(FormatPsStatus("h:1", status), "refused"));
  status.set_nonfinite_refused(2);
  status.set_duplicate_pushes(1);
  const std::string text = FormatPsStatus("h:1", status);
  EXPECT_TRUE(absl::StrContains(text, "refused: 2 non-finite, 0 non-finite pushes skipped, 1 "
                                      "retried pushes not reapplied, 0 over a limit, 0 streams "
                                      "cancelled\n"))
      << text;
}

TEST_F(PsctlTest, UnreachableTaskIsOneLineNamingItAndExitOne) {
  auto ports = PickFreePorts(1);
  ASSERT_TRUE(ports.ok());
  const std::string nobody = absl::StrCat("127.0.0.1:", (*ports)[0]);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"status", "--chief=" + nobody, "--timeout=1s"},
           {"layout", "--chief=" + nobody, "--timeout=1s"},
           {"ps", "--address=" + nobody, "--timeout=1s"},
           {"health", "--address=" + nobody, "--timeout=1s"}}) {
    Result r = RunArgs(args);
    EXPECT_EQ(r.code, 1) << args[0];
    EXPECT_TRUE(r.out.empty());
    EXPECT_TRUE(absl::StrContains(r.err, nobody)) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("psctl: ", 0), 0u) << r.err;
  }
}

// psctl health is the image's HEALTHCHECK: 0 only while the daemon says SERVING; a daemon
// shutting down says NOT_SERVING and gets 1, as one that does not answer (above).
TEST_F(PsctlTest, HealthIsZeroOnlyWhileTheDaemonServes) {
  Result serving = RunArgs({"health", "--address=" + ps_address_});
  EXPECT_EQ(serving.code, 0) << serving.err;
  EXPECT_EQ(serving.out, ps_address_ + ": SERVING\n");
  SetServing(ps_server_.get(), false);
  Result stopping = RunArgs({"health", "--address=" + ps_address_});
  EXPECT_EQ(stopping.code, 1) << stopping.err;
  EXPECT_EQ(stopping.out, ps_address_ + ": NOT_SERVING\n");
}

// Without --address, psctl health asks the daemon of the task TF_CONFIG names, on
// localhost at its port (in a container the address is a service name, and the daemon
// listens on every interface); without TF_CONFIG there is nothing to ask: usage error.
TEST_F(PsctlTest, HealthWithoutAddressAsksThisTasksOwnPort) {
  const std::string port = ps_address_.substr(ps_address_.rfind(':') + 1);
  const std::string tf_config = absl::StrCat(
      R"({"cluster":{"chief":["chief.example:2222"],"ps":["ps0.example:)", port,
      R"("],"worker":["worker0.example:2222"]},"task":{"type":"ps","index":0}})");
  ASSERT_EQ(setenv("TF_CONFIG", tf_config.c_str(), 1), 0);
  Result own = RunArgs({"health", "--timeout=10s"});
  unsetenv("TF_CONFIG");
  EXPECT_EQ(own.code, 0) << own.err;
  EXPECT_EQ(own.out, "localhost:" + port + ": SERVING\n");

  Result none = RunArgs({"health"});
  EXPECT_EQ(none.code, 2);
  EXPECT_TRUE(absl::StrContains(none.err, "TF_CONFIG is not set")) << none.err;
}

// Under mutual TLS the daemon's own port needs a certificate the image's HEALTHCHECK does
// not have: PSTRAIN_HEALTH_PORT (the daemon's plaintext --health_port) takes precedence
// over TF_CONFIG's port; a value that is not a port is a usage error naming it.
TEST_F(PsctlTest, HealthWithoutAddressAsksPstrainHealthPortFirst) {
  const std::string port = ps_address_.substr(ps_address_.rfind(':') + 1);
  auto nobody = PickFreePorts(1);
  ASSERT_TRUE(nobody.ok());
  // TF_CONFIG names a port where nothing listens: only the health port answers.
  const std::string tf_config = absl::StrCat(
      R"({"cluster":{"chief":["chief.example:2222"],"ps":["ps0.example:)", (*nobody)[0],
      R"("],"worker":["worker0.example:2222"]},"task":{"type":"ps","index":0}})");
  ASSERT_EQ(setenv("TF_CONFIG", tf_config.c_str(), 1), 0);
  ASSERT_EQ(setenv("PSTRAIN_HEALTH_PORT", port.c_str(), 1), 0);
  Result health = RunArgs({"health", "--timeout=10s"});
  ASSERT_EQ(setenv("PSTRAIN_HEALTH_PORT", "22x", 1), 0);
  Result bad = RunArgs({"health", "--timeout=1s"});
  unsetenv("PSTRAIN_HEALTH_PORT");
  unsetenv("TF_CONFIG");
  EXPECT_EQ(health.code, 0) << health.err;
  EXPECT_EQ(health.out, "localhost:" + port + ": SERVING\n");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(absl::StrContains(bad.err, "PSTRAIN_HEALTH_PORT=22x is not a port")) << bad.err;
}

TEST(PsctlUsageTest, BadUsageExitsTwo) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {},
           {"frobnicate", "--chief=h:1"},
           {"status"},
           {"layout", "--address=h:1"},
           {"ps", "--chief=h:1"},
           {"status", "--chief=h:1", "--timeout=soon"},
           {"status", "--chief=h:1", "--timeout=0s"},
           {"status", "--chief=h:1", "--verbose"},
           {"status", "extra", "--chief=h:1"},
           {"ps", "--address=h:1", "--watch"},
           {"health", "--address=h:1", "--json"},
           {"status", "--chief=h:1", "--watch", "--interval=never"},
           {"status", "--chief=h:1", "--watch", "--count=0"}}) {
    Result r = RunArgs(args);
    EXPECT_EQ(r.code, 2) << absl::StrJoin(args, " ");
    EXPECT_TRUE(absl::StrContains(r.err, "usage: psctl")) << r.err;
  }
  Result help = RunArgs({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_TRUE(absl::StrContains(help.out, "usage: psctl"));
}

}  // namespace
}  // namespace pstrain
