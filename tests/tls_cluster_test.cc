// Mutual TLS against the real daemons (#12): certificates from tools/make_certs.sh, a
// parameter-server job and a multi_worker_mirrored job whose every task has --tls_dir and
// no token, so every channel (worker to ps, chief to ps and workers, tasks to the chief,
// the all-reduce ring) must speak mutual TLS for the jobs to finish. Meanwhile this test
// calls them: without TLS, with a certificate of another CA (refused in the handshake),
// with a worker's certificate (PERMISSION_DENIED for the chief's calls and for registering
// as ps 0), and on the plaintext --health_port (health only).

#include <signal.h>

#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/daemon/daemon_security.h"
#include "common/rpc/client_security.h"
#include "common/rpc/grpc_util.h"
#include "deploy/local/free_port.h"
#include "deploy/local/local_cluster.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/chief.grpc.pb.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

// Runs tools/make_certs.sh into `dir` for `names` (each valid for localhost).
void MakeCerts(const std::string& dir, const std::vector<std::string>& names) {
  ProcessGroup group;
  std::vector<std::string> args = {"tools/make_certs.sh", dir};
  for (const std::string& name : names) {
    args.push_back(name == "admin" ? name : name + "=localhost,127.0.0.1,::1");
  }
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

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  SetTimeout(context.get(), absl::Seconds(10));
  return context;
}

grpc::Status PsShutdown(const ClientSecurity& security, const std::string& ps) {
  SetClientSecurity(security);
  auto stub = ParameterServer::NewStub(CreateChannel(ps));
  ShutdownRequest request;
  ShutdownResponse response;
  return stub->Shutdown(Context().get(), request, &response);
}

// The ps's status read with the admin certificate: OK only if the ps listens and speaks TLS.
grpc::Status PsStatusAsAdmin(const ClientSecurity& admin, const std::string& ps) {
  SetClientSecurity(admin);
  auto stub = ParameterServer::NewStub(CreateChannel(ps));
  PsStatusRequest request;
  PsStatusResponse response;
  return stub->GetStatus(Context().get(), request, &response);
}

// A TLS refusal in the handshake, not a ps that does not listen: UNAVAILABLE whose reason is
// not a refused connection, while an admin call just before and just after succeeds.
void ExpectRefusedInTheHandshake(const char* what, const grpc::Status& status,
                                 const grpc::Status& before, const grpc::Status& after) {
  EXPECT_TRUE(before.ok()) << what << ": the ps did not answer just before: "
                           << before.error_message();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << what << ": "
                                                                << status.error_message();
  EXPECT_FALSE(absl::StrContains(status.error_message(), "Connection refused"))
      << what << ": " << status.error_message();
  EXPECT_TRUE(after.ok()) << what << ": the ps did not answer just after: "
                          << after.error_message();
}

bool WaitForTraining(const ClientSecurity& admin, const std::string& chief) {
  const absl::Time end = absl::Now() + absl::Minutes(2);
  while (absl::Now() < end) {
    SetClientSecurity(admin);
    auto stub = Chief::NewStub(CreateChannel(chief));
    ChiefStatusRequest request;
    ChiefStatusResponse response;
    if (stub->GetStatus(Context().get(), request, &response).ok() &&
        response.phase() == ChiefStatusResponse::TRAINING && response.global_step() > 0) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

TEST(TlsClusterTest, AParameterServerJobTrainsOverMutualTlsAndRefusesEveryoneElse) {
  const std::string certs = FreshTestDir("certs");
  const std::string other_ca = FreshTestDir("other_ca");
  MakeCerts(certs, {"chief-0", "ps-0", "worker-0", "worker-1", "admin"});
  MakeCerts(other_ca, {"chief-0", "admin"});
  absl::StatusOr<std::vector<int>> health_ports = PickFreePorts(1);
  ASSERT_TRUE(health_ports.ok());
  const int health_port = (*health_ports)[0];

  // No token anywhere: only the certificates let the tasks talk.
  setenv(kAuthTokenEnvironmentVariable, "", 1);
  ProcessGroup group;
  const std::string job = WriteTinyJob(
      "tls_ps", {{"fit", {{"epochs", 3}}}});
  const std::string tls = "--tls_dir=" + certs;
  const TestCluster cluster = StartTestCluster(
      group, 1, 2, {tls, "--heartbeat_interval=200ms", "--chief_timeout=30s"},
      {"--job=" + job, "--steps_per_call=2", absl::StrCat("--health_port=", health_port)});
  // The job runs until this test lets it: worker 1 is stopped when the chief, every
  // worker ready, places the variables (its log line), before any step; its chunk never
  // returns, so the first epoch cannot end while the calls below are made.
  absl::StatusOr<pid_t> worker1 = group.Pid("worker1");
  ASSERT_TRUE(worker1.ok()) << worker1.status();
  absl::Notification held;
  SignalOnLine hold{"chief", "placement: ", "worker1", SIGSTOP, /*in_log=*/true};
  hold.after = [&held] { held.Notify(); };
  ProcessRun run;
  std::thread wait([&] { run = CollectRun(group, absl::Minutes(4), absl::Seconds(10), &hold); });
  absl::Cleanup join = [&] {
    held.WaitForNotificationWithTimeout(absl::Minutes(2));  // a SIGCONT before it is lost
    kill(-*worker1, SIGCONT);
    if (wait.joinable()) wait.join();
  };
  const ClientSecurity admin = TlsAs(certs, {Role::kAdmin, 0});
  ASSERT_TRUE(held.WaitForNotificationWithTimeout(absl::Minutes(2)))
      << "the chief never placed the variables";
  const bool training = WaitForTraining(admin, cluster.chief);
  EXPECT_TRUE(training);
  if (training) {
    // Plaintext, even with the right identity claimed: no TLS handshake, no call.
    {
      const grpc::Status before = PsStatusAsAdmin(admin, cluster.ps[0]);
      const grpc::Status refused = PsShutdown({"", {Role::kChief, 0}}, cluster.ps[0]);
      ExpectRefusedInTheHandshake("plaintext", refused, before,
                                  PsStatusAsAdmin(admin, cluster.ps[0]));
    }
    // A chief certificate of another CA: the handshake fails.
    {
      const grpc::Status before = PsStatusAsAdmin(admin, cluster.ps[0]);
      const grpc::Status refused = PsShutdown(TlsAs(other_ca, {Role::kChief, 0}), cluster.ps[0]);
      ExpectRefusedInTheHandshake("another CA", refused, before,
                                  PsStatusAsAdmin(admin, cluster.ps[0]));
    }
    // The cluster's CA, a worker's certificate: not the chief's calls, not ps 0's place.
    const ClientSecurity worker1 = TlsAs(certs, {Role::kWorker, 1});
    const grpc::Status stop = PsShutdown(worker1, cluster.ps[0]);
    EXPECT_EQ(stop.error_code(), grpc::StatusCode::PERMISSION_DENIED) << stop.error_message();
    SetClientSecurity(worker1);
    auto chief = Chief::NewStub(CreateChannel(cluster.chief));
    RegisterTaskRequest request;
    request.set_task_type("ps");
    request.set_task_index(0);
    request.set_address("127.0.0.1:1");
    RegisterTaskResponse response;
    const grpc::Status registered = chief->RegisterTask(Context().get(), request, &response);
    EXPECT_EQ(registered.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << registered.error_message();
    EXPECT_TRUE(response.job_json().empty());
    // The admin certificate reads the ps's status.
    SetClientSecurity(admin);
    auto ps = ParameterServer::NewStub(CreateChannel(cluster.ps[0]));
    PsStatusRequest status_request;
    PsStatusResponse status;
    EXPECT_TRUE(ps->GetStatus(Context().get(), status_request, &status).ok());
    EXPECT_GT(status.variables_size(), 0);
    // The chief's plaintext health port: health answers, nothing else is served there.
    SetClientSecurity({});
    const std::string health_address = absl::StrCat("localhost:", health_port);
    auto health = grpc::health::v1::Health::NewStub(CreateChannel(health_address));
    grpc::health::v1::HealthCheckRequest check;
    grpc::health::v1::HealthCheckResponse serving;
    const grpc::Status checked = health->Check(Context().get(), check, &serving);
    EXPECT_TRUE(checked.ok()) << checked.error_message();
    EXPECT_EQ(serving.status(), grpc::health::v1::HealthCheckResponse::SERVING);
    // Anyone may call it, so it takes only what a health check needs: a 1 MiB service
    // name is refused before any handler, and the port still answers.
    grpc::health::v1::HealthCheckRequest oversized;
    oversized.set_service(std::string(1 << 20, 'x'));
    grpc::health::v1::HealthCheckResponse unused;
    const grpc::Status too_big = health->Check(Context().get(), oversized, &unused);
    EXPECT_EQ(too_big.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << too_big.error_message();
    EXPECT_TRUE(health->Check(Context().get(), check, &serving).ok());
    auto chief_on_health = Chief::NewStub(CreateChannel(health_address));
    ChiefStatusRequest chief_request;
    ChiefStatusResponse chief_status;
    EXPECT_EQ(chief_on_health->GetStatus(Context().get(), chief_request, &chief_status).error_code(),
              grpc::StatusCode::UNIMPLEMENTED);
  }
  SetClientSecurity({});
  std::move(join).Invoke();
  ASSERT_EQ(run.exits.size(), 4u);
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
  }
  EXPECT_TRUE(absl::StrContains(run.stdout_of["chief"], "Epoch 3/3")) << run.stdout_of["chief"];
  EXPECT_TRUE(absl::StrContains(run.stderr_of["ps0"], "refused /pstrain.ParameterServer/Shutdown from certificate worker-1"))
      << run.stderr_of["ps0"];
}

TEST(TlsClusterTest, TheAllReduceRingSpeaksMutualTls) {
  const std::string certs = FreshTestDir("ring_certs");
  MakeCerts(certs, {"worker-0", "worker-1"});
  setenv(kAuthTokenEnvironmentVariable, "", 1);
  ProcessGroup group;
  const std::string job = WriteTinyJob("tls_ring", {{"fit", {{"epochs", 2}}}});
  StartMirroredWorkers(group, 2, {"--job=" + job, "--device=cpu", "--tls_dir=" + certs});
  ProcessRun run = CollectRun(group, absl::Minutes(4), absl::Seconds(10));
  ASSERT_EQ(run.exits.size(), 2u);
  for (const auto& exit : run.exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << " " << DescribeExit(exit) << "\n"
                                 << run.stderr_of[exit.name];
  }
  EXPECT_TRUE(absl::StrContains(run.stdout_of["worker0"], "Epoch 2/2")) << run.stdout_of["worker0"];
}

// The image's HEALTHCHECK (`psctl health`, no flags) under mutual TLS: with
// PSTRAIN_HEALTH_PORT in the container's environment the daemon serves plaintext health
// there (as --health_port) and psctl asks it; without it psctl asks the TLS port, which a
// plaintext client cannot pass.
TEST(TlsClusterTest, TheImagesHealthcheckAsksTheHealthPortUnderTls) {
  const std::string certs = FreshTestDir("healthcheck_certs");
  MakeCerts(certs, {"ps-0"});
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(3);
  ASSERT_TRUE(ports.ok());
  const std::string health_port = absl::StrCat((*ports)[2]);
  const std::string tf_config = MakeTfConfig(
      {{"chief", {absl::StrCat("localhost:", (*ports)[0])}},
       {"ps", {absl::StrCat("localhost:", (*ports)[1])}}},
      "ps", 0);
  const std::map<std::string, std::string> env = {{"TF_CONFIG", tf_config},
                                                  {kAuthTokenEnvironmentVariable, ""},
                                                  {"PSTRAIN_HEALTH_PORT", health_port}};
  ProcessGroup ps;
  ASSERT_TRUE(ps.Start({"ps0", "ps_server/ps_server",
                        {"--tls_dir=" + certs, "--register_timeout=120s"}, env})
                  .ok());
  auto psctl_health = [&](std::map<std::string, std::string> psctl_env) {
    ProcessGroup psctl;
    EXPECT_TRUE(psctl.Start({"psctl", "tools/psctl", {"health", "--timeout=2s"}, psctl_env}).ok());
    return CollectRun(psctl, absl::Seconds(30), absl::Seconds(1));
  };
  ProcessRun healthy;
  for (int i = 0; i < 100; ++i) {
    healthy = psctl_health(env);
    if (!healthy.exits.empty() && healthy.exits[0].exit_code == 0) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(healthy.exits.size(), 1u);
  EXPECT_EQ(healthy.exits[0].exit_code, 0) << healthy.stderr_of["psctl"];
  EXPECT_EQ(healthy.stdout_of["psctl"], absl::StrCat("localhost:", health_port, ": SERVING\n"));
  ProcessRun on_tls_port =
      psctl_health({{"TF_CONFIG", tf_config}, {"PSTRAIN_HEALTH_PORT", ""}});
  ASSERT_EQ(on_tls_port.exits.size(), 1u);
  EXPECT_EQ(on_tls_port.exits[0].exit_code, 1) << on_tls_port.stdout_of["psctl"];
  ASSERT_TRUE(ps.Signal("ps0", SIGTERM).ok());
  ProcessRun stopped = CollectRun(ps, absl::Seconds(60), absl::Seconds(5));
  ASSERT_EQ(stopped.exits.size(), 1u);
  EXPECT_TRUE(absl::StrContains(stopped.stderr_of["ps0"], "health (plaintext, grpc.health.v1 only) on port " + health_port))
      << stopped.stderr_of["ps0"];
}

}  // namespace
}  // namespace pstrain
