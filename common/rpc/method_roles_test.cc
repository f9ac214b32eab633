#include "common/rpc/method_roles.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "proto/chief.pb.h"
#include "proto/collective.pb.h"
#include "proto/function.pb.h"
#include "proto/ps.pb.h"
#include "proto/worker.pb.h"

namespace pstrain {
namespace {

const CallerIdentity kChief{Role::kChief, 0};
const CallerIdentity kWorker1{Role::kWorker, 1};
const CallerIdentity kPs0{Role::kPs, 0};
const CallerIdentity kAdmin{Role::kAdmin, 0};

// A new RPC in proto/ without a row would be closed to everyone: the table must decide.
TEST(MethodRolesTest, EveryMethodOfEveryPstrainServiceHasARow) {
  // Linking the generated code registers the files in the generated pool.
  (void)CreateVariablesRequest::descriptor();
  (void)RunStepsRequest::descriptor();
  (void)RegisterTaskRequest::descriptor();
  (void)CollectiveChunk::descriptor();
  (void)RunFunctionRequest::descriptor();
  const std::vector<std::string> table = MethodsWithRoles();
  int methods = 0;
  for (const char* service_name : {"pstrain.ParameterServer", "pstrain.Chief",
                                    "pstrain.Collective", "pstrain.FunctionWorker"}) {
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service_name);
    ASSERT_NE(service, nullptr) << service_name;
    for (int i = 0; i < service->method_count(); ++i) {
      const std::string path = absl::StrCat("/", service->full_name(), "/", service->method(i)->name());
      EXPECT_NE(std::find(table.begin(), table.end(), path), table.end())
          << path << " has no row in common/rpc/method_roles.cc";
      ++methods;
    }
  }
  EXPECT_GE(methods, 20);
}

TEST(MethodRolesTest, OnlyTheChiefChangesOrRestoresAJob) {
  for (const char* method : {"/pstrain.ParameterServer/CreateVariables",
                             "/pstrain.ParameterServer/RestoreState",
                             "/pstrain.ParameterServer/WriteCheckpointShard",
                             "/pstrain.ParameterServer/RestoreCheckpointShard",
                             "/pstrain.FunctionWorker/RunFunction"}) {
    EXPECT_TRUE(AuthorizeMethod(method, kChief).ok()) << method;
    for (const CallerIdentity& other : {kWorker1, kPs0, kAdmin}) {
      const absl::Status status = AuthorizeMethod(method, other);
      EXPECT_TRUE(absl::IsPermissionDenied(status)) << method << " " << FormatIdentity(other);
    }
  }
}

TEST(MethodRolesTest, OnlyWorkersPushAndTheChiefAndWorkersPull) {
  EXPECT_TRUE(AuthorizeMethod("/pstrain.ParameterServer/Push", kWorker1).ok());
  EXPECT_TRUE(AuthorizeMethod("/pstrain.ParameterServer/PushPullStream", kWorker1).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(AuthorizeMethod("/pstrain.ParameterServer/Push", kChief)));
  EXPECT_TRUE(absl::IsPermissionDenied(AuthorizeMethod("/pstrain.ParameterServer/Push", kAdmin)));
  EXPECT_TRUE(AuthorizeMethod("/pstrain.ParameterServer/Pull", kChief).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(AuthorizeMethod("/pstrain.ParameterServer/Pull", kPs0)));
}

TEST(MethodRolesTest, TheOperatorReadsStopsAndCheckpointsButDoesNotTrain) {
  for (const char* method : {"/pstrain.ParameterServer/GetStatus", "/pstrain.ParameterServer/ReadState",
                             "/pstrain.ParameterServer/Shutdown",
                             "/pstrain.FunctionWorker/Shutdown",
                             "/pstrain.Chief/GetStatus", "/pstrain.Chief/SaveCheckpoint"}) {
    EXPECT_TRUE(AuthorizeMethod(method, kAdmin).ok()) << method;
  }
  for (const char* method : {"/pstrain.Chief/RegisterTask", "/pstrain.Chief/Heartbeat",
                             "/pstrain.Collective/PushChunk", "/pstrain.Collective/ChunkStream",
                             "/pstrain.ParameterServer/PushPull"}) {
    EXPECT_TRUE(absl::IsPermissionDenied(AuthorizeMethod(method, kAdmin))) << method;
  }
  EXPECT_TRUE(
      absl::IsPermissionDenied(AuthorizeMethod("/pstrain.FunctionWorker/Shutdown", kWorker1)));
}

TEST(MethodRolesTest, HealthAndReflectionAreOpenAndUnknownMethodsClosed) {
  EXPECT_TRUE(IsOpenMethod("/grpc.health.v1.Health/Check"));
  EXPECT_TRUE(IsOpenMethod("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"));
  EXPECT_FALSE(IsOpenMethod("/pstrain.Chief/GetStatus"));
  const absl::Status unknown = AuthorizeMethod("/pstrain.ParameterServer/Nuke", kChief);
  EXPECT_TRUE(absl::IsPermissionDenied(unknown));
  EXPECT_NE(unknown.message().find("not open to any caller"), std::string::npos);
}

TEST(CallerIdentityTest, ParsesWhatItFormatsAndRefusesTheRest) {
  for (const CallerIdentity& identity : {kChief, kWorker1, kPs0, kAdmin}) {
    absl::StatusOr<CallerIdentity> parsed = ParseIdentity(FormatIdentity(identity));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, identity);
  }
  EXPECT_EQ(ParseIdentity("chief")->role, Role::kChief);
  EXPECT_EQ(ParseIdentity("master-0")->role, Role::kChief);
  for (const char* bad : {"", "worker", "worker-", "worker--1", "worker-x", "evaluator-0",
                          "ps-99999999999999999999"}) {
    EXPECT_FALSE(ParseIdentity(bad).ok()) << bad;
  }
}

TEST(CallerIdentityTest, ConstantTimeEqualsComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("secret-token-0123", "secret-token-0123"));
  EXPECT_FALSE(ConstantTimeEquals("secret-token-0123", "secret-token-0124"));
  EXPECT_FALSE(ConstantTimeEquals("secret-token-0123", "secret-token-012"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

}  // namespace
}  // namespace pstrain
