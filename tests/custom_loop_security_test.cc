// Authorization and TLS of the custom loop (examples/custom_loop on pstrain/pstrain.h)
// against real processes (#12): its parameter_server tasks (the ps's ParameterServer, the
// workers' FunctionWorker) and its multi_worker_mirrored ring serve only the job's token
// or certificates, and only to the role each method is for. The ps and workers start first
// and wait for the chief; meanwhile this test calls them as an outsider (no token, a wrong
// token, plaintext against TLS) and as the wrong task (a worker's identity or
// certificate): every call is refused with UNAUTHENTICATED or PERMISSION_DENIED (or fails
// the TLS handshake) and changes nothing. Then the chief starts and the job trains to its
// end, every process exiting 0. A task without a token, certificates or --insecure does
// not start.

#include <signal.h>

#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/daemon/daemon_security.h"
#include "common/rpc/client_security.h"
#include "common/rpc/grpc_util.h"
#include "deploy/local/free_port.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/collective.grpc.pb.h"
#include "proto/function.grpc.pb.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

constexpr char kCustomLoop[] = "examples/custom_loop";
// This test's job token: not the suite's (.bazelrc), so only what it passes counts.
constexpr char kToken[] = "custom-loop-security-test-token-42";

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

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  SetTimeout(context.get(), absl::Seconds(10));
  return context;
}

// A channel to `address` that sends `security` (read when the channel is made).
std::shared_ptr<grpc::Channel> ChannelAs(const ClientSecurity& security,
                                         const std::string& address) {
  SetClientSecurity(security);
  return CreateChannel(address);
}

// Waits up to a minute until `address` answers health checks as `security`.
bool WaitForServing(const std::string& address, const ClientSecurity& security) {
  const absl::Time end = absl::Now() + absl::Minutes(1);
  while (absl::Now() < end) {
    auto health = grpc::health::v1::Health::NewStub(ChannelAs(security, address));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    if (health->Check(Context().get(), request, &response).ok()) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

// Until the parameter-server worker at `address` has registered its functions and serves
// them (GetStatus ready): serving health comes first, so a test that means to check the
// worker is still ready after something must see it ready before.
bool WaitForReady(const std::string& address, const ClientSecurity& security) {
  const absl::Time end = absl::Now() + absl::Minutes(1);
  while (absl::Now() < end) {
    auto worker = FunctionWorker::NewStub(ChannelAs(security, address));
    FunctionWorkerStatusRequest request;
    FunctionWorkerStatusResponse response;
    if (worker->GetStatus(Context().get(), request, &response).ok() && response.ready()) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

// TF_CONFIG's cluster on free loopback ports: job -> its tasks' addresses.
std::vector<std::pair<std::string, std::vector<std::string>>> FreeCluster(
    const std::vector<std::pair<std::string, int>>& counts) {
  int total = 0;
  for (const auto& [job, n] : counts) total += n;
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(total);
  EXPECT_TRUE(ports.ok()) << ports.status();
  std::vector<std::pair<std::string, std::vector<std::string>>> cluster;
  int next = 0;
  for (const auto& [job, n] : counts) {
    std::vector<std::string> addresses;
    for (int i = 0; i < n && ports.ok(); ++i) {
      addresses.push_back(absl::StrCat("localhost:", (*ports)[next++]));
    }
    cluster.push_back({job, addresses});
  }
  return cluster;
}

// Starts custom_loop as task (`job`, `index`), named "chief", "ps0", "worker1".
void StartTask(ProcessGroup& group,
               const std::vector<std::pair<std::string, std::vector<std::string>>>& cluster,
               const std::string& job, int index, std::vector<std::string> args,
               std::map<std::string, std::string> env) {
  env["TF_CONFIG"] = MakeTfConfig(cluster, job, index);
  env["OPENBLAS_NUM_THREADS"] = "1";
  const std::string name = job == "chief" ? job : absl::StrCat(job, index);
  ASSERT_TRUE(group.Start({name, kCustomLoop, std::move(args), std::move(env)}).ok());
}

void ExpectAllExitedCleanly(const ProcessRun& run, size_t processes) {
  EXPECT_EQ(run.exits.size(), processes);
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of.at(exit.name);
  }
}

std::string WriteToken(const std::string& dir) {
  const std::string path = dir + "/token";
  std::ofstream(path) << kToken << "\n";
  return path;
}

// Every call that could stop, read or change the ps or the worker, as `caller`.
void ExpectParameterServerTasksRefuse(const Caller& caller, const std::string& ps_address,
                                      const std::string& worker_address) {
  SCOPED_TRACE(caller.name);
  auto expect = [&](const char* what, const grpc::Status& status) {
    EXPECT_EQ(status.error_code(), caller.expected) << what << ": " << status.error_message();
    EXPECT_FALSE(absl::StrContains(status.error_message(), kToken)) << what;
  };
  auto ps = ParameterServer::NewStub(ChannelAs(caller.security, ps_address));
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
  {
    ReadStateRequest request;
    ReadStateResponse response;
    expect("ps ReadState", ps->ReadState(Context().get(), request, &response));
  }
  {
    ShutdownRequest request;
    ShutdownResponse response;
    expect("ps Shutdown", ps->Shutdown(Context().get(), request, &response));
  }
  auto worker = FunctionWorker::NewStub(ChannelAs(caller.security, worker_address));
  {
    RunFunctionRequest request;
    request.set_function("train_fn");
    RunFunctionResponse response;
    expect("worker RunFunction", worker->RunFunction(Context().get(), request, &response));
  }
  {
    ShutdownRequest request;
    request.set_reason("an outsider says so");
    ShutdownResponse response;
    expect("worker Shutdown", worker->Shutdown(Context().get(), request, &response));
  }
}

TEST(CustomLoopSecurityTest, ParameterServerTasksServeOnlyTheJobsTokenAndTheRightRole) {
  const std::string dir = FreshTestDir("custom_loop_security_ps_token");
  const std::string token_file = WriteToken(dir);
  const std::string job = WriteTinyJob("custom_loop_security_ps", {{"fit", {{"epochs", 3}}}});
  const auto cluster = FreeCluster({{"chief", 1}, {"ps", 1}, {"worker", 1}});
  const std::string ps_address = cluster[1].second[0];
  const std::string worker_address = cluster[2].second[0];
  // The token from --auth_token_file only: the suite's PSTRAIN_AUTH_TOKEN is not the job's.
  const std::vector<std::string> args = {"--strategy=parameter_server", "--job=" + job,
                                         "--auth_token_file=" + token_file};
  const std::map<std::string, std::string> env = {{kAuthTokenEnvironmentVariable, ""}};
  ProcessGroup group;
  StartTask(group, cluster, "ps", 0, args, env);
  StartTask(group, cluster, "worker", 0, args, env);
  const ClientSecurity admin{kToken, {Role::kAdmin, 0}};
  ASSERT_TRUE(WaitForServing(ps_address, admin));
  ASSERT_TRUE(WaitForServing(worker_address, admin));
  ASSERT_TRUE(WaitForReady(worker_address, admin));

  std::vector<Caller> callers = Outsiders();
  callers.push_back(
      {"worker 0's identity", {kToken, {Role::kWorker, 0}}, grpc::StatusCode::PERMISSION_DENIED});
  for (const Caller& caller : callers) {
    ExpectParameterServerTasksRefuse(caller, ps_address, worker_address);
  }
  // Nothing changed: no variable on the ps, the worker still ready and idle.
  {
    auto ps = ParameterServer::NewStub(ChannelAs(admin, ps_address));
    PsStatusRequest request;
    PsStatusResponse response;
    const grpc::Status status = ps->GetStatus(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.variables_size(), 0);
    auto worker = FunctionWorker::NewStub(ChannelAs(admin, worker_address));
    FunctionWorkerStatusRequest wrequest;
    FunctionWorkerStatusResponse wresponse;
    const grpc::Status wstatus = worker->GetStatus(Context().get(), wrequest, &wresponse);
    ASSERT_TRUE(wstatus.ok()) << wstatus.error_message();
    EXPECT_TRUE(wresponse.ready());
    EXPECT_EQ(wresponse.functions_run(), 0);
  }

  StartTask(group, cluster, "chief", 0, args, env);
  ProcessRun run = CollectRun(group, absl::Minutes(4), absl::Seconds(10));
  ExpectAllExitedCleanly(run, 3);
  const std::string& out = run.stdout_of["chief"];
  EXPECT_TRUE(absl::StrContains(out, "Epoch 3/3")) << out << run.stderr_of["chief"];
  EXPECT_FALSE(absl::StrContains(out, "functions run per worker: 0")) << out;
  EXPECT_TRUE(absl::StrContains(run.stderr_of["ps0"], "refused /pstrain.ParameterServer/"))
      << run.stderr_of["ps0"];
  EXPECT_TRUE(absl::StrContains(run.stderr_of["worker0"], "refused /pstrain.FunctionWorker/"))
      << run.stderr_of["worker0"];
}

TEST(CustomLoopSecurityTest, OnlyTheLeftNeighbourSendsChunksInTheMultiWorkerRing) {
  const std::string job = WriteTinyJob(
      "custom_loop_security_ring", {{"fit", {{"epochs", 2}}}, {"data", {{"train", {{"samples", 800}}}}}});
  const auto cluster = FreeCluster({{"chief", 1}, {"worker", 2}});
  const std::string worker0 = cluster[1].second[0];  // rank 1: its left neighbour is the chief
  const std::vector<std::string> args = {"--strategy=multi_worker_mirrored", "--job=" + job};
  const std::map<std::string, std::string> env = {{kAuthTokenEnvironmentVariable, kToken}};
  ProcessGroup group;
  StartTask(group, cluster, "worker", 0, args, env);
  StartTask(group, cluster, "worker", 1, args, env);
  ASSERT_TRUE(WaitForServing(worker0, {kToken, {Role::kAdmin, 0}}));

  std::vector<Caller> callers = Outsiders();
  // Worker 1 holds the token but is not worker 0's left neighbour.
  callers.push_back(
      {"worker 1's identity", {kToken, {Role::kWorker, 1}}, grpc::StatusCode::PERMISSION_DENIED});
  for (const Caller& caller : callers) {
    auto collective = Collective::NewStub(ChannelAs(caller.security, worker0));
    CollectiveChunk chunk;
    chunk.set_src_rank(0);
    chunk.set_data(std::string(1 << 16, '\x7f'));  // NaNs, had it been taken
    CollectiveChunkAck ack;
    const grpc::Status status = collective->PushChunk(Context().get(), chunk, &ack);
    EXPECT_EQ(status.error_code(), caller.expected) << caller.name << ": " << status.error_message();
  }

  StartTask(group, cluster, "chief", 0, args, env);
  ProcessRun run = CollectRun(group, absl::Minutes(4), absl::Seconds(10));
  ExpectAllExitedCleanly(run, 3);
  const std::string& out = run.stdout_of["chief"];
  EXPECT_TRUE(absl::StrContains(out, "Epoch 2/2")) << out << run.stderr_of["chief"];
  EXPECT_FALSE(absl::StrContains(out, "nan")) << out;
}

// Runs tools/make_certs.sh into `dir` for `names` (each valid for localhost).
void MakeCerts(const std::string& dir, const std::vector<std::string>& names) {
  ProcessGroup group;
  std::vector<std::string> args = {"tools/make_certs.sh", dir};
  for (const std::string& name : names) args.push_back(name + "=localhost,127.0.0.1,::1");
  ASSERT_TRUE(group.Start({"make_certs", "/bin/bash", args, {}}).ok());
  ProcessRun run = CollectRun(group, absl::Minutes(1), absl::Seconds(1));
  ASSERT_EQ(run.exits.size(), 1u);
  ASSERT_EQ(run.exits[0].exit_code, 0) << run.stderr_of["make_certs"];
}

ClientSecurity TlsAs(const std::string& dir, CallerIdentity identity) {
  SecurityFlags flags;
  flags.tls_dir = dir;
  absl::StatusOr<ClientSecurity> security = ClientSecurityFromFlags(flags, identity);
  EXPECT_TRUE(security.ok()) << security.status();
  return security.ok() ? *security : ClientSecurity{};
}

TEST(CustomLoopSecurityTest, AParameterServerJobTrainsOverMutualTlsAlone) {
  const std::string certs = FreshTestDir("custom_loop_security_tls_certs") + "/certs";
  MakeCerts(certs, {"chief-0", "ps-0", "worker-0"});
  const std::string job = WriteTinyJob("custom_loop_security_tls", {{"fit", {{"epochs", 2}}}});
  const auto cluster = FreeCluster({{"chief", 1}, {"ps", 1}, {"worker", 1}});
  const std::string worker_address = cluster[2].second[0];
  // No token anywhere: only the certificates let the tasks talk.
  const std::vector<std::string> args = {"--strategy=parameter_server", "--job=" + job,
                                         "--tls_dir=" + certs};
  const std::map<std::string, std::string> env = {{kAuthTokenEnvironmentVariable, ""}};
  ProcessGroup group;
  StartTask(group, cluster, "ps", 0, args, env);
  StartTask(group, cluster, "worker", 0, args, env);
  ASSERT_TRUE(WaitForServing(worker_address, TlsAs(certs, {Role::kWorker, 0})));

  {  // Plaintext, even with a token: the TLS handshake fails.
    auto worker = FunctionWorker::NewStub(ChannelAs({kToken, {Role::kChief, 0}}, worker_address));
    ShutdownRequest request;
    ShutdownResponse response;
    const grpc::Status status = worker->Shutdown(Context().get(), request, &response);
    EXPECT_FALSE(status.ok());
  }
  {  // The worker's own certificate is not the chief's.
    auto worker =
        FunctionWorker::NewStub(ChannelAs(TlsAs(certs, {Role::kWorker, 0}), worker_address));
    ShutdownRequest request;
    ShutdownResponse response;
    const grpc::Status status = worker->Shutdown(Context().get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  }

  StartTask(group, cluster, "chief", 0, args, env);
  ProcessRun run = CollectRun(group, absl::Minutes(4), absl::Seconds(10));
  ExpectAllExitedCleanly(run, 3);
  EXPECT_TRUE(absl::StrContains(run.stdout_of["chief"], "Epoch 2/2"))
      << run.stdout_of["chief"] << run.stderr_of["chief"];
}

TEST(CustomLoopSecurityTest, ATaskWithoutATokenCertificatesOrInsecureDoesNotStart) {
  const auto cluster = FreeCluster({{"chief", 1}, {"ps", 1}, {"worker", 1}});
  ProcessGroup group;
  StartTask(group, cluster, "ps", 0, {"--strategy=parameter_server"},
            {{kAuthTokenEnvironmentVariable, ""}});
  ProcessRun run = CollectRun(group, absl::Seconds(60), absl::Seconds(5));
  ASSERT_EQ(run.exits.size(), 1u);
  EXPECT_EQ(run.exits[0].exit_code, 2) << DescribeExit(run.exits[0]);
  EXPECT_TRUE(absl::StrContains(run.stderr_of["ps0"], "--auth_token_file")) << run.stderr_of["ps0"];

  // --insecure: it starts (and warns), serving anyone.
  ProcessGroup insecure;
  StartTask(insecure, cluster, "ps", 0, {"--strategy=parameter_server", "--insecure"},
            {{kAuthTokenEnvironmentVariable, ""}});
  EXPECT_TRUE(WaitForServing(cluster[1].second[0], {"", {Role::kAdmin, 0}}));
  auto ps = ParameterServer::NewStub(ChannelAs({"", {Role::kAdmin, 0}}, cluster[1].second[0]));
  PsStatusRequest request;
  PsStatusResponse response;
  EXPECT_TRUE(ps->GetStatus(Context().get(), request, &response).ok());
  ASSERT_TRUE(insecure.Signal("ps0", SIGTERM).ok());
  ProcessRun stopped = CollectRun(insecure, absl::Seconds(60), absl::Seconds(5));
  ASSERT_EQ(stopped.exits.size(), 1u);
  EXPECT_TRUE(absl::StrContains(stopped.stderr_of["ps0"], "--insecure")) << stopped.stderr_of["ps0"];
}

}  // namespace
}  // namespace pstrain
