// Plaintext authentication against the real daemons (#27, defect 7): the job's secret is
// never sent, a call overheard on the wire cannot be sent again, and a process that
// answers at the chief's address without the secret cannot stop the job's tasks.
//
// A parameter-server job (1 ps, 1 worker) trains; the chief is killed and a fake chief,
// which does not hold the token, takes its address: it records everything the ps and the
// worker send it and answers every heartbeat with shutdown:true. Neither task obeys it,
// and the token's bytes appear nowhere in what it received. Then a Push made as the
// worker, recorded whole (metadata too), is sent again to the real ps: refused
// UNAUTHENTICATED, and no variable's version moves.

#include <signal.h>
#include <sys/types.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/rpc/call_mac.h"
#include "common/rpc/client_security.h"
#include "common/rpc/grpc_util.h"
#include "deploy/local/process_group.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/chief.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "tests/cluster_test_util.h"

namespace pstrain {
namespace {

std::string JobToken() {
  const char* token = std::getenv(kAuthTokenEnvironmentVariable);
  return token != nullptr ? token : "";
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  SetTimeout(context.get(), absl::Seconds(10));
  return context;
}

// A chief that does not hold the job's token: it keeps every byte it is sent (metadata
// keys and values, request messages) and tells every task that heartbeats to shut down.
class FakeChief final : public Chief::Service {
 public:
  grpc::Status RegisterTask(grpc::ServerContext* context, const RegisterTaskRequest* request,
                            RegisterTaskResponse*) override {
    Record(*context, request->SerializeAsString());
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext* context, const HeartbeatRequest* request,
                         HeartbeatResponse* response) override {
    Record(*context, request->SerializeAsString());
    absl::MutexLock lock(&mu_);
    ++heartbeats_[absl::StrCat(request->task_type(), "-", request->task_index())];
    response->set_shutdown(true);
    return grpc::Status::OK;
  }
  grpc::Status Report(grpc::ServerContext* context, const ReportRequest* request,
                      ReportResponse*) override {
    Record(*context, request->SerializeAsString());
    return grpc::Status::OK;
  }

  int heartbeats(const std::string& task) {
    absl::MutexLock lock(&mu_);
    return heartbeats_[task];
  }
  std::string received() {
    absl::MutexLock lock(&mu_);
    return received_;
  }

 private:
  void Record(const grpc::ServerContext& context, const std::string& message) {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, value] : context.client_metadata()) {
      received_.append(key.data(), key.size()).append("=").append(value.data(), value.size());
      received_.push_back('\n');
    }
    received_ += message;
  }

  absl::Mutex mu_;
  std::string received_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> heartbeats_ ABSL_GUARDED_BY(mu_);
};

// Whether `pid` is a process that has not exited (a zombie has).
bool Running(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

bool WaitForTraining(const std::string& chief) {
  const absl::Time end = absl::Now() + absl::Minutes(2);
  while (absl::Now() < end) {
    auto stub = Chief::NewStub(CreateChannel(chief));
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

PsStatusResponse PsStatus(const std::string& ps) {
  auto stub = ParameterServer::NewStub(CreateChannel(ps));
  PsStatusRequest request;
  PsStatusResponse response;
  const grpc::Status status = stub->GetStatus(Context().get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

std::map<std::string, int64_t> Versions(const PsStatusResponse& status) {
  std::map<std::string, int64_t> versions;
  for (const VariableInfo& v : status.variables()) versions[v.name()] = v.version();
  return versions;
}

// A Push of `variable` as worker 0 with its whole metadata given (the call as it crossed
// the wire), on a channel of its own.
grpc::Status PushWithMetadata(const std::string& ps, const PushRequest& push,
                              const std::vector<std::pair<std::string, std::string>>& metadata) {
  auto stub =
      ParameterServer::NewStub(grpc::CreateChannel(ps, grpc::InsecureChannelCredentials()));
  auto context = Context();
  for (const auto& [key, value] : metadata) context->AddMetadata(key, value);
  PushResponse response;
  return stub->Push(context.get(), push, &response);
}

TEST(PlaintextAuthClusterTest, AFakeChiefLearnsNoSecretAndStopsNoTaskAndNoCallReplays) {
  ASSERT_GE(JobToken().size(), 16u);
  SetClientSecurity({JobToken(), {Role::kAdmin, 0}});
  ProcessGroup group;
  const std::string job = WriteTinyJob("plaintext_auth", {{"fit", {{"epochs", 1000}}}});
  // A lost chief is given long enough that only an obeyed shutdown could stop a task
  // while this test runs.
  const TestCluster cluster =
      StartTestCluster(group, 1, 1, {"--heartbeat_interval=200ms", "--chief_timeout=5m"},
                       {"--job=" + job});
  ASSERT_EQ(cluster.ps.size(), 1u);
  absl::StatusOr<pid_t> chief_pid = group.Pid("chief");
  absl::StatusOr<pid_t> ps_pid = group.Pid("ps0");
  absl::StatusOr<pid_t> worker_pid = group.Pid("worker0");
  ASSERT_TRUE(chief_pid.ok() && ps_pid.ok() && worker_pid.ok());
  ProcessRun run;
  std::thread wait([&] { run = CollectRun(group, absl::Minutes(5), absl::Seconds(10)); });
  // On every path out: the tasks are stopped and their output collected.
  absl::Cleanup stop = [&] {
    kill(-*ps_pid, SIGKILL);
    kill(-*worker_pid, SIGKILL);
    kill(-*chief_pid, SIGKILL);
    if (wait.joinable()) wait.join();
  };
  ASSERT_TRUE(WaitForTraining(cluster.chief));

  // The chief goes; a fake takes its address.
  kill(-*chief_pid, SIGKILL);
  FakeChief fake;
  absl::StatusOr<RunningServer> fake_server;
  for (int i = 0; i < 100; ++i) {
    ServerOptions options;
    options.listen_address = cluster.chief;
    options.services = {&fake};
    fake_server = StartServer(options);
    if (fake_server.ok()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(fake_server.ok()) << fake_server.status();
  absl::Cleanup stop_fake = [&] { fake_server->server->Shutdown(); };

  // Both tasks heartbeat to it, are told to shut down many times, and go on.
  const absl::Time give_up = absl::Now() + ScaledForSanitizers(absl::Seconds(30));
  while ((fake.heartbeats("ps-0") < 10 || fake.heartbeats("worker-0") < 10) &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_GE(fake.heartbeats("ps-0"), 10);
  EXPECT_GE(fake.heartbeats("worker-0"), 10);
  absl::SleepFor(absl::Seconds(1));
  EXPECT_TRUE(Running(*ps_pid)) << "the ps obeyed a fake chief";
  EXPECT_TRUE(Running(*worker_pid)) << "the worker obeyed a fake chief";
  // What it received holds the identities and MACs, never the token.
  const std::string received = fake.received();
  EXPECT_TRUE(absl::StrContains(received, kMacMetadataKey)) << received.substr(0, 2000);
  EXPECT_FALSE(absl::StrContains(received, JobToken())) << received.substr(0, 2000);

  // A Push as worker 0, overheard whole, sent again to the real ps.
  ASSERT_TRUE(Running(*ps_pid));
  PsStatusResponse before = PsStatus(cluster.ps[0]);
  ASSERT_GT(before.variables_size(), 0);
  // The worker's last chunk of steps has ended (no chief, no more work): versions settle.
  for (int i = 0; i < 100; ++i) {
    absl::SleepFor(absl::Milliseconds(300));
    PsStatusResponse again = PsStatus(cluster.ps[0]);
    if (Versions(again) == Versions(before)) break;
    before = std::move(again);
  }
  const VariableInfo& variable = before.variables(0);
  PushRequest push;
  Gradient* gradient = push.add_gradients();
  gradient->set_name(variable.name());
  gradient->mutable_gradient()->set_dtype(DT_FLOAT);
  int64_t elements = 1;
  for (int64_t d : variable.shape()) {
    gradient->mutable_gradient()->add_shape(d);
    elements *= d;
  }
  const std::vector<float> ones(elements, 1.0f);
  gradient->mutable_gradient()->set_content(
      std::string(reinterpret_cast<const char*>(ones.data()), ones.size() * sizeof(float)));
  const std::string method = "/pstrain.ParameterServer/Push";
  const int64_t time_micros = absl::ToUnixMicros(absl::Now());
  const std::string nonce = NewCallNonce();
  const std::vector<std::pair<std::string, std::string>> overheard = {
      {kIdentityMetadataKey, "worker-0"},
      {kTimeMetadataKey, absl::StrCat(time_micros)},
      {kNonceMetadataKey, nonce},
      {kMacMetadataKey, CallMac(JobToken(), method, "worker-0", time_micros, nonce)}};
  const grpc::Status first = PushWithMetadata(cluster.ps[0], push, overheard);
  ASSERT_TRUE(first.ok()) << first.error_message();
  const std::map<std::string, int64_t> after_first = Versions(PsStatus(cluster.ps[0]));
  EXPECT_EQ(after_first.at(variable.name()), variable.version() + 1);
  const grpc::Status replay = PushWithMetadata(cluster.ps[0], push, overheard);
  EXPECT_EQ(replay.error_code(), grpc::StatusCode::UNAUTHENTICATED) << replay.error_message();
  EXPECT_TRUE(absl::StrContains(replay.error_message(), "replayed")) << replay.error_message();
  EXPECT_EQ(Versions(PsStatus(cluster.ps[0])), after_first);
  // The token itself, sent as before this change, opens nothing either.
  const grpc::Status old_style = PushWithMetadata(
      cluster.ps[0], push, {{"x-pstrain-token", JobToken()}, {kIdentityMetadataKey, "worker-0"}});
  EXPECT_EQ(old_style.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Versions(PsStatus(cluster.ps[0])), after_first);

  EXPECT_TRUE(Running(*ps_pid));
  EXPECT_TRUE(Running(*worker_pid));
  std::move(stop).Invoke();
  EXPECT_FALSE(absl::StrContains(run.stderr_of["ps0"], "the chief says the job is over"))
      << run.stderr_of["ps0"];
  EXPECT_FALSE(absl::StrContains(run.stderr_of["worker0"], "the chief says the job is over"))
      << run.stderr_of["worker0"];
}

}  // namespace
}  // namespace pstrain
