// psctl and a worker's ps client act on no answer from a process that is not of the job
// (#27, defect 7): a fake chief and a fake ps, which hold no token, answer every call
// (a status, a checkpoint, values) at addresses psctl and the client are sent to.
// - psctl refuses each answer of the fakes with one line naming the address
//   (UNAUTHENTICATED) and prints nothing of it, exit 1; its health check, open to all,
//   still answers; against a server of the job it prints the status.
// - A streamed push-pull (PushPullStream) is refused at the reply's first message, as
//   early as the protocol lets a client know (the proof of a server of the job comes in
//   the reply's headers, which it sends once the push is whole): the fake sees the
//   client cancel the stream after one message of the many it has, and the client gets
//   UNAUTHENTICATED naming the ps, not the fake's values.

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/rpc/call_authorizer.h"
#include "common/rpc/client_security.h"
#include "common/rpc/grpc_util.h"
#include "gtest/gtest.h"
#include "proto/chief.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "ps_server/rpc/ps_service.h"
#include "ps_server/variable_store.h"
#include "tools/psctl_lib.h"

namespace pstrain {
namespace {

std::string JobToken() {
  const char* token = std::getenv(kAuthTokenEnvironmentVariable);
  return token != nullptr ? token : "";
}

// A chief that holds no token and answers everything as a chief would.
class FakeChief final : public Chief::Service {
 public:
  grpc::Status GetStatus(grpc::ServerContext*, const ChiefStatusRequest*,
                         ChiefStatusResponse* response) override {
    response->set_phase("training");
    response->set_global_step(777);
    return grpc::Status::OK;
  }
  grpc::Status SaveCheckpoint(grpc::ServerContext*, const SaveCheckpointRequest*,
                              SaveCheckpointResponse* response) override {
    response->set_path("/fake/checkpoint");
    response->set_step(777);
    return grpc::Status::OK;
  }
};

// The values a fake ps answers with: [kValueBytes / 4] floats of 7, in chunks of 16
// bytes on a stream.
constexpr int kValueBytes = 1024;
constexpr int kChunkBytes = 16;

// A ps that holds no token: it answers a status, and a push-pull with values.
class FakePs final : public ParameterServer::Service {
 public:
  grpc::Status GetStatus(grpc::ServerContext*, const PsStatusRequest*,
                         PsStatusResponse* response) override {
    response->set_pushes(777);
    return grpc::Status::OK;
  }
  grpc::Status PushPull(grpc::ServerContext*, const PushPullRequest*,
                        PushPullResponse* response) override {
    Values(response->mutable_pull());
    response->mutable_pull()->mutable_values(0)->set_content(Content());
    return grpc::Status::OK;
  }
  // Reads the whole push, sends the values' header and first chunk, and then waits for
  // the client to cancel before it sends the rest.
  grpc::Status PushPullStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<PushPullChunkResponse, PushPullChunkRequest>* stream) override {
    PushPullChunkRequest in;
    while (stream->Read(&in)) {
    }
    PushPullChunkResponse out;
    Values(out.mutable_pull());
    const std::string content = Content();
    out.set_data(content.substr(0, kChunkBytes));
    if (!stream->Write(out)) return grpc::Status::OK;
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (!context->IsCancelled() && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    if (context->IsCancelled()) {
      cancelled_after_first_message_.Notify();
      return grpc::Status::CANCELLED;
    }
    for (int offset = kChunkBytes; offset < kValueBytes; offset += kChunkBytes) {
      PushPullChunkResponse chunk;
      chunk.set_offset(offset);
      chunk.set_data(content.substr(offset, kChunkBytes));
      if (!stream->Write(chunk)) break;
    }
    return grpc::Status::OK;
  }

  absl::Notification cancelled_after_first_message_;

 private:
  static void Values(PullResponse* pull) {
    TensorProto* value = pull->add_values();
    value->set_dtype(DT_FLOAT);
    value->add_shape(kValueBytes / 4);
    pull->add_versions(1);
  }
  static std::string Content() {
    const std::vector<float> sevens(kValueBytes / 4, 7.0f);
    return std::string(reinterpret_cast<const char*>(sevens.data()), kValueBytes);
  }
};

struct Psctl {
  int code;
  std::string out;
  std::string err;
};

Psctl RunArgs(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunPsctl(args, out, err);
  return {code, out.str(), err.str()};
}

class ServerProofTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(JobToken().size(), 16u) << "the suite sets PSTRAIN_AUTH_TOKEN (.bazelrc)";
    auto chief = StartServer({"127.0.0.1:0", {&fake_chief_}});
    ASSERT_TRUE(chief.ok()) << chief.status();
    chief_server_ = std::move(chief->server);
    chief_ = absl::StrCat("127.0.0.1:", chief->port);
    auto ps = StartServer({"127.0.0.1:0", {&fake_ps_}});
    ASSERT_TRUE(ps.ok()) << ps.status();
    ps_server_ = std::move(ps->server);
    ps_ = absl::StrCat("127.0.0.1:", ps->port);
  }
  void TearDown() override {
    if (chief_server_) chief_server_->Shutdown();
    if (ps_server_) ps_server_->Shutdown();
  }

  FakeChief fake_chief_;
  FakePs fake_ps_;
  std::unique_ptr<grpc::Server> chief_server_;
  std::unique_ptr<grpc::Server> ps_server_;
  std::string chief_;
  std::string ps_;
};

TEST_F(ServerProofTest, PsctlActsOnNoAnswerOfAServerWithoutTheToken) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> commands = {
      {{"status", "--chief=" + chief_}, "psctl: chief at " + chief_ + ": UNAUTHENTICATED: "},
      {{"status", "--json", "--chief=" + chief_}, "psctl: chief at " + chief_ + ": UNAUTHENTICATED: "},
      {{"status", "--watch", "--count=3", "--chief=" + chief_},
       "psctl: chief at " + chief_ + ": UNAUTHENTICATED: "},
      {{"layout", "--chief=" + chief_}, "psctl: chief at " + chief_ + ": UNAUTHENTICATED: "},
      {{"checkpoint", "--chief=" + chief_}, "psctl: chief at " + chief_ + ": UNAUTHENTICATED: "},
      {{"ps", "--address=" + ps_}, "psctl: ps at " + ps_ + ": UNAUTHENTICATED: "},
  };
  for (const auto& [args, error] : commands) {
    const Psctl run = RunArgs(args);
    const std::string what = absl::StrCat("psctl ", args[0], " ", args.back());
    EXPECT_EQ(run.code, kPsctlUnreachable) << what;
    EXPECT_TRUE(absl::StartsWith(run.err, error)) << what << ": " << run.err;
    EXPECT_TRUE(absl::StrContains(run.err, "did not prove it holds the job's token"))
        << what << ": " << run.err;
    // One line, and nothing of the fake's answer printed.
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_EQ(run.out, "") << what;
  }
  // Health is open to all (Kubernetes' probes): a fake's SERVING is only its own.
  const Psctl health = RunArgs({"health", "--address=" + ps_});
  EXPECT_EQ(health.code, kPsctlOk) << health.err;
  EXPECT_EQ(health.out, ps_ + ": SERVING\n");

  // A ps of the job proves it: psctl prints its status.
  VariableStore store;
  PsServiceImpl real(&store, [](const std::string&) {});
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.services = {&real};
  options.credentials =
      AuthorizingServerCredentials(std::make_shared<CallAuthorizer>(JobToken()));
  auto server = StartServer(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = absl::StrCat("127.0.0.1:", server->port);
  const Psctl ok = RunArgs({"ps", "--address=" + address});
  EXPECT_EQ(ok.code, kPsctlOk) << ok.err;
  EXPECT_TRUE(absl::StartsWith(ok.out, "ps " + address)) << ok.out;
  server->server->Shutdown();
  // psctl's security lasted for its command only.
  EXPECT_FALSE(GetClientSecurity().require_server_proof);
}

TEST_F(ServerProofTest, AStreamFromAServerWithoutTheTokenIsCutAtItsFirstMessage) {
  ClientSecurity worker;
  worker.token = JobToken();
  worker.identity = {Role::kWorker, 0};
  worker.require_server_proof = true;
  SetClientSecurity(worker);
  const std::vector<NamedTensor> gradients = {{"v", Tensor({kValueBytes / 4})}};

  GrpcPsClientOptions streamed;
  streamed.stream_threshold_bytes = 0;
  streamed.chunk_bytes = 64;
  std::unique_ptr<PsClient> client = CreateGrpcPsClient(0, ps_, absl::Seconds(60), streamed);
  absl::StatusOr<std::vector<Tensor>> values = client->PushPull(gradients, 1);
  ASSERT_FALSE(values.ok());
  EXPECT_EQ(values.status().code(), absl::StatusCode::kUnauthenticated) << values.status();
  EXPECT_TRUE(absl::StrContains(values.status().message(), ps_)) << values.status();
  EXPECT_TRUE(absl::StrContains(values.status().message(), "did not prove")) << values.status();
  // The fake had sent one message of its 64 when the client cancelled.
  // (Its handler sees the cancel a moment after the client returned.)
  EXPECT_TRUE(fake_ps_.cancelled_after_first_message_.WaitForNotificationWithTimeout(
      absl::Seconds(30)));

  // The unary push-pull: refused too.
  std::unique_ptr<PsClient> unary = CreateGrpcPsClient(0, ps_, absl::Seconds(60));
  values = unary->PushPull(gradients, 1);
  ASSERT_FALSE(values.ok());
  EXPECT_EQ(values.status().code(), absl::StatusCode::kUnauthenticated) << values.status();
  SetClientSecurity({JobToken(), {Role::kAdmin, 0}});
}

}  // namespace
}  // namespace pstrain
