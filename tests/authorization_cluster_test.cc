// Authorization against the real daemons (#12): a parameter-server job and a
// multi_worker_mirrored job run as separate processes sharing the suite's token
// (.bazelrc's PSTRAIN_AUTH_TOKEN), while this test, as an outsider, calls them
// with no token, a wrong token, or the right token and the wrong identity. Every call that
// could stop, read or change the job is refused with UNAUTHENTICATED or PERMISSION_DENIED,
// nothing changes (no variable restored or added, no task stopped or registered in
// another's place) and the jobs train to their end, every process exiting 0.

#include <signal.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/rpc/client_security.h"
#include "common/rpc/grpc_util.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/chief.grpc.pb.h"
#include "proto/collective.grpc.pb.h"
#include "proto/function.grpc.pb.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "proto/worker.pb.h"
#include "tests/cluster_test_util.h"
#include "tests/ps_final_status.h"

namespace pstrain {
namespace {

// The token every process of the job has (the suite's, from the environment).
std::string JobToken() {
  const char* token = std::getenv(kAuthTokenEnvironmentVariable);
  return token != nullptr ? token : "";
}

// How an outsider, or a task in the wrong role, calls.
struct Caller {
  std::string name;
  ClientSecurity security;
  grpc::StatusCode expected;
};

std::vector<Caller> Outsiders() {
  return {{"no token", {"", {Role::kChief, 0}}, grpc::StatusCode::UNAUTHENTICATED},
          {"a wrong token",
           {"not-the-job-token-0123456789abcdef", {Role::kChief, 0}},
           grpc::StatusCode::UNAUTHENTICATED}};
}

template <typename Stub>
std::unique_ptr<Stub> StubAs(const ClientSecurity& security, const std::string& address,
                             std::unique_ptr<Stub> (*new_stub)(
                                 const std::shared_ptr<grpc::ChannelInterface>&,
                                 const grpc::StubOptions&)) {
  SetClientSecurity(security);  // read when the channel is made
  return new_stub(CreateChannel(address), grpc::StubOptions());
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  SetTimeout(context.get(), absl::Seconds(10));
  return context;
}

// Waits until the chief says it trains (asked with the job's token as "admin").
bool WaitForTraining(const std::string& chief) {
  const absl::Time end = absl::Now() + absl::Minutes(2);
  while (absl::Now() < end) {
    // A channel of its own each time: one made before the chief listened was seen to stay
    // in reconnect backoff past this short job's end.
    auto stub = StubAs<Chief::Stub>({JobToken(), {Role::kAdmin, 0}}, chief, &Chief::NewStub);
    ChiefStatusRequest request;
    ChiefStatusResponse response;
    const grpc::Status status = stub->GetStatus(Context().get(), request, &response);
    if (status.ok() && response.phase() == ChiefStatusResponse::TRAINING &&
        response.global_step() > 0) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

// A variable the ps holds, with its shape (asked with the job's token as "admin", which
// may read status). The training job has created its variables by now: none is a failure,
// not a reason to aim the refused calls at a made-up name.
VariableInfo SomeVariable(const std::string& ps) {
  auto stub =
      StubAs<ParameterServer::Stub>({JobToken(), {Role::kAdmin, 0}}, ps, &ParameterServer::NewStub);
  PsStatusRequest request;
  PsStatusResponse response;
  const grpc::Status status = stub->GetStatus(Context().get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_GT(response.variables_size(), 0) << response.DebugString();
  return response.variables_size() > 0 ? response.variables(0) : VariableInfo();
}

// The pid of `name` in `group`, read before another thread drives the group (a stopped
// task cannot exit, so the pid stays its own while it is stopped).
pid_t PidOf(const ProcessGroup& group, const std::string& name) {
  absl::StatusOr<pid_t> pid = group.Pid(name);
  EXPECT_TRUE(pid.ok()) << pid.status();
  return pid.ok() ? *pid : -1;
}

// Lets a task stopped with SIGSTOP go on (its whole process group, as ProcessGroup
// signals), on every path out of the test.
void Resume(pid_t pid) {
  if (pid > 0) kill(-pid, SIGCONT);
}

// Every call of `caller` that would stop, read or change the job, each expected refused.
void ExpectEveryCallRefused(const Caller& caller, const TestCluster& cluster,
                            const VariableInfo& variable) {
  SCOPED_TRACE(caller.name);
  auto expect = [&](const char* what, const grpc::Status& status) {
    EXPECT_EQ(status.error_code(), caller.expected) << what << ": " << status.error_message();
    // A refusal names no secret.
    EXPECT_FALSE(absl::StrContains(status.error_message(), JobToken())) << what;
  };
  auto ps = StubAs<ParameterServer::Stub>(caller.security, cluster.ps[0], &ParameterServer::NewStub);
  {
    ShutdownRequest request;
    ShutdownResponse response;
    expect("ps Shutdown", ps->Shutdown(Context().get(), request, &response));
  }
  {
    // A restore the ps would apply for a caller allowed to: the variable's own name and
    // shape, every value 666, version 999999 (the final account shows if it took).
    RestoreStateRequest request;
    VariableState* state = request.add_variables();
    state->set_name(variable.name());
    state->set_version(999999);
    state->mutable_value()->set_dtype(DT_FLOAT);
    int64_t elements = 1;
    for (int64_t d : variable.shape()) {
      state->mutable_value()->add_shape(d);
      elements *= d;
    }
    const std::vector<float> evil(elements, 666.0f);
    state->mutable_value()->set_content(
        std::string(reinterpret_cast<const char*>(evil.data()), evil.size() * sizeof(float)));
    RestoreStateResponse response;
    expect("ps RestoreState", ps->RestoreState(Context().get(), request, &response));
  }
  {
    ReadStateRequest request;
    ReadStateResponse response;
    const grpc::Status status = ps->ReadState(Context().get(), request, &response);
    // An identity allowed to read (none of the outsiders) would get the values.
    expect("ps ReadState", status);
    EXPECT_EQ(response.variables_size(), 0);
  }
  {
    CreateVariablesRequest request;
    VariableDef* def = request.add_variables();
    def->set_name("intruder");
    def->mutable_initial_value()->set_dtype(DT_FLOAT);
    def->mutable_initial_value()->add_shape(1);
    def->mutable_initial_value()->set_content(std::string(4, '\0'));
    CreateVariablesResponse response;
    expect("ps CreateVariables", ps->CreateVariables(Context().get(), request, &response));
  }
  if (caller.security.identity.role != Role::kWorker) {
    PullRequest pull;
    pull.add_names(variable.name());
    PullResponse pulled;
    expect("ps Pull", ps->Pull(Context().get(), pull, &pulled));
    PushRequest push;
    PushResponse pushed;
    expect("ps Push", ps->Push(Context().get(), push, &pushed));
  }
  auto chief = StubAs<Chief::Stub>(caller.security, cluster.chief, &Chief::NewStub);
  {
    RegisterTaskRequest request;
    request.set_task_type("ps");
    request.set_task_index(0);
    request.set_address("127.0.0.1:1");
    request.set_incarnation(12345);
    RegisterTaskResponse response;
    expect("chief RegisterTask as ps 0", chief->RegisterTask(Context().get(), request, &response));
    EXPECT_TRUE(response.job_json().empty());
  }
  auto worker = StubAs<FunctionWorker::Stub>(caller.security, cluster.workers[0],
                                             &FunctionWorker::NewStub);
  {
    // The chief's training chunk, as the worker daemon's built-in function.
    RunStepsRequest chunk;
    chunk.set_steps(1);
    chunk.set_batch_size(1);
    chunk.add_ps_addresses("127.0.0.1:1");  // a foreign ps
    RunFunctionRequest request;
    request.set_function("pstrain.train_chunk");
    request.set_arguments(chunk.SerializeAsString());
    RunFunctionResponse response;
    expect("worker RunFunction pstrain.train_chunk",
           worker->RunFunction(Context().get(), request, &response));
  }
  {
    ShutdownRequest request;
    ShutdownResponse response;
    if (caller.security.identity.role != Role::kAdmin) {
      expect("worker Shutdown", worker->Shutdown(Context().get(), request, &response));
    }
  }
}

TEST(AuthorizationClusterTest, OutsidersAndWorkersCannotStopReadOrChangeAParameterServerJob) {
  ASSERT_GE(JobToken().size(), 16u) << "the suite sets PSTRAIN_AUTH_TOKEN (.bazelrc)";
  ProcessGroup group;
  const std::string job = WriteTinyJob(
      "auth_ps", {{"fit", {{"epochs", 3}}}});
  const TestCluster cluster =
      StartTestCluster(group, 1, 2, {"--heartbeat_interval=200ms", "--chief_timeout=30s"},
                       {"--job=" + job, "--steps_per_call=2"});
  // The job runs until this test lets it: worker 1 is stopped when the chief, every
  // worker ready, places the variables (its log line), before any step. Worker 1's chunk
  // of the first epoch then never returns, so that epoch cannot end however long the calls
  // below take, while the chief, the ps and worker 0 (training its own shard) answer.
  const pid_t worker1 = PidOf(group, "worker1");
  std::string refused_restore_of;  // the variable the refused RestoreState aimed at
  absl::Notification held;
  SignalOnLine hold{"chief", "placement: ", "worker1", SIGSTOP, /*in_log=*/true};
  hold.after = [&held] { held.Notify(); };
  ProcessRun run;
  std::thread wait([&] { run = CollectRun(group, absl::Minutes(4), absl::Seconds(10), &hold); });
  absl::Cleanup join = [&wait] {
    if (wait.joinable()) wait.join();  // a failed ASSERT below: the job still ends
  };
  {
    absl::Cleanup resume = [&] {
      held.WaitForNotificationWithTimeout(absl::Minutes(2));  // a SIGCONT before it is lost
      Resume(worker1);
    };
    ASSERT_TRUE(held.WaitForNotificationWithTimeout(absl::Minutes(2)))
        << "the chief never placed the variables";
    const bool training = WaitForTraining(cluster.chief);
    ASSERT_TRUE(training) << "the chief never reported training";
    const VariableInfo variable = SomeVariable(cluster.ps[0]);
    ASSERT_FALSE(variable.name().empty());
    refused_restore_of = variable.name();
    std::vector<Caller> callers = Outsiders();
    // The right token, the wrong role: a worker's identity cannot do the chief's work.
    callers.push_back({"worker 1's identity", {JobToken(), {Role::kWorker, 1}},
                       grpc::StatusCode::PERMISSION_DENIED});
    for (const Caller& caller : callers) ExpectEveryCallRefused(caller, cluster, variable);
    // Worker 1's identity cannot register (or heartbeat) as worker 0 either.
    auto chief = StubAs<Chief::Stub>({JobToken(), {Role::kWorker, 1}}, cluster.chief, &Chief::NewStub);
    RegisterTaskRequest request;
    request.set_task_type("worker");
    request.set_task_index(0);
    request.set_address(cluster.workers[0]);
    RegisterTaskResponse response;
    const grpc::Status status = chief->RegisterTask(Context().get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
    EXPECT_TRUE(response.job_json().empty());
  }
  SetClientSecurity({JobToken(), {Role::kAdmin, 0}});
  wait.join();

  // The job trained on to its end: every process exited 0, the last epoch was printed.
  ASSERT_EQ(run.exits.size(), 4u);
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
  }
  EXPECT_TRUE(absl::StrContains(run.stdout_of["chief"], "Epoch 3/3")) << run.stdout_of["chief"];
  // Nothing was restored or added: the ps's own final account. Its one ps holds every
  // variable and applied every push at once (async), so each variable's version is the
  // number of pushes; the refused restore (version 999999) would show in the one it aimed at.
  const std::map<int, PsStatusResponse> final_status = FinalPsStatuses(run.stderr_of["ps0"]);
  ASSERT_EQ(final_status.count(0), 1u) << run.stderr_of["ps0"];
  const PsStatusResponse& ps = final_status.at(0);
  ASSERT_GT(ps.pushes(), 0);
  bool aimed_at_found = false;
  for (const VariableInfo& v : ps.variables()) {
    EXPECT_NE(v.name(), "intruder");
    EXPECT_EQ(v.version(), ps.pushes()) << v.name();
    aimed_at_found |= v.name() == refused_restore_of;
  }
  EXPECT_TRUE(aimed_at_found) << refused_restore_of << " is missing: " << ps.DebugString();
  // The refusals were logged by the daemons that refused them.
  EXPECT_TRUE(absl::StrContains(run.stderr_of["ps0"], "refused /pstrain.ParameterServer/Shutdown"))
      << run.stderr_of["ps0"];
  EXPECT_TRUE(absl::StrContains(run.stderr_of["chief"], "refused /pstrain.Chief/RegisterTask"))
      << run.stderr_of["chief"];
}

TEST(AuthorizationClusterTest, OnlyTheLeftNeighbourSendsChunksAndOnlyAsItsOwnRank) {
  ASSERT_GE(JobToken().size(), 16u);
  ProcessGroup group;
  const std::string job = WriteTinyJob(
      "auth_ring", {{"fit", {{"epochs", 3}}}});
  const std::vector<std::string> addresses =
      StartMirroredWorkers(group, 2, {"--job=" + job, "--device=cpu"});
  ASSERT_EQ(addresses.size(), 2u);
  // The ring cannot start, let alone end, until this test lets worker 0 go on: stopped
  // from the start, it leaves worker 1 serving its ring port and waiting for it
  // (--startup_timeout, 2 min) while the refused chunks below are sent.
  const pid_t worker0 = PidOf(group, "worker0");
  ASSERT_TRUE(group.Signal("worker0", SIGSTOP).ok());
  absl::Cleanup resume = [worker0] { Resume(worker0); };
  ProcessRun run;
  std::thread wait([&] { run = CollectRun(group, absl::Minutes(4), absl::Seconds(10)); });
  absl::Cleanup join = [&wait, worker0] {
    Resume(worker0);
    if (wait.joinable()) wait.join();
  };
  // Worker 1's ring port, once it serves (health needs nothing).
  bool serving = false;
  for (int i = 0; i < 600 && !serving; ++i) {
    auto health = grpc::health::v1::Health::NewStub(CreateChannel(addresses[1]));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    serving = health->Check(Context().get(), request, &response).ok();
    if (!serving) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(serving);
  std::vector<Caller> callers = Outsiders();
  // The job's token, but worker 1 itself claiming to be its left neighbour, rank 0.
  callers.push_back({"worker 1's identity", {JobToken(), {Role::kWorker, 1}},
                     grpc::StatusCode::PERMISSION_DENIED});
  for (const Caller& caller : callers) {
    auto collective = StubAs<Collective::Stub>(caller.security, addresses[1], &Collective::NewStub);
    CollectiveChunk chunk;
    chunk.set_src_rank(0);
    chunk.set_data(std::string(1 << 16, '\x7f'));  // NaNs, had it been taken
    CollectiveChunkAck ack;
    const grpc::Status status = collective->PushChunk(Context().get(), chunk, &ack);
    EXPECT_EQ(status.error_code(), caller.expected) << caller.name << ": " << status.error_message();
    // The same chunk on the stream the ring's workers keep open (ChunkStream).
    std::unique_ptr<grpc::ClientContext> context = Context();
    std::unique_ptr<grpc::ClientWriter<CollectiveChunk>> writer =
        collective->ChunkStream(context.get(), &ack);
    writer->Write(chunk);  // false once the server refused the stream
    writer->WritesDone();
    const grpc::Status streamed = writer->Finish();
    EXPECT_EQ(streamed.error_code(), caller.expected)
        << caller.name << " (stream): " << streamed.error_message();
  }
  SetClientSecurity({JobToken(), {Role::kAdmin, 0}});
  std::move(resume).Invoke();
  wait.join();
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
  }
  EXPECT_TRUE(absl::StrContains(run.stdout_of["worker0"], "Epoch 3/3")) << run.stdout_of["worker0"];
  EXPECT_FALSE(absl::StrContains(run.stdout_of["worker0"], "nan"));
}

// A daemon of a cluster with no token and no --insecure does not start: authorization is
// on by default.
TEST(AuthorizationClusterTest, ADaemonWithoutATokenDoesNotStart) {
  ProcessGroup group;
  const auto cluster = LoopbackCluster(1, 1);
  ASSERT_TRUE(group
                  .Start({"ps0", "ps_server/ps_server", {},
                          {{"TF_CONFIG", MakeTfConfig(cluster, "ps", 0)},
                           {kAuthTokenEnvironmentVariable, ""}}})
                  .ok());
  ProcessRun run = CollectRun(group, absl::Seconds(60), absl::Seconds(5));
  ASSERT_EQ(run.exits.size(), 1u);
  EXPECT_EQ(run.exits[0].exit_code, 2) << DescribeExit(run.exits[0]);
  EXPECT_TRUE(absl::StrContains(run.stderr_of["ps0"], "--auth_token_file"))
      << run.stderr_of["ps0"];
}

}  // namespace
}  // namespace pstrain
