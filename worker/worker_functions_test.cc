// WorkerFunctions against the requests a chief sends and those no chief sends.

#include "worker/worker_functions.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

RunFunctionRequest Call(const std::string& name, const std::string& arguments) {
  RunFunctionRequest request;
  request.set_function(name);
  request.set_arguments(arguments);
  return request;
}

TEST(WorkerFunctionsTest, NotReadyUntilAFunctionIsRegistered) {
  WorkerFunctions functions;
  EXPECT_FALSE(functions.Status().ready());
  absl::StatusOr<RunFunctionResponse> response = functions.Run(Call(kTrainChunkFunction, ""));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_NE(response->message().find("no job yet"), std::string::npos) << response->message();
}

TEST(WorkerFunctionsTest, RunsTheNamedFunctionOnItsArguments) {
  WorkerFunctions functions;
  ASSERT_TRUE(functions.Register("echo", [](const std::string& a) { return "<" + a + ">"; }).ok());
  functions.SetStatusSource([](FunctionWorkerStatusResponse* s) { s->set_steps_done(7); });
  absl::StatusOr<RunFunctionResponse> response = functions.Run(Call("echo", "x"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->code(), 0);
  EXPECT_EQ(response->result(), "<x>");
  const FunctionWorkerStatusResponse status = functions.Status();
  EXPECT_TRUE(status.ready());
  EXPECT_EQ(status.functions_run(), 1);
  EXPECT_EQ(status.steps_done(), 7);
  ASSERT_EQ(status.functions_size(), 1);
  EXPECT_EQ(status.functions(0), "echo");
}

TEST(WorkerFunctionsTest, AFunctionsErrorTravelsInTheResponse) {
  WorkerFunctions functions;
  ASSERT_TRUE(functions
                  .Register("fails",
                            [](const std::string&) -> absl::StatusOr<std::string> {
                              return absl::AbortedError("a ps failed: ps task 0");
                            })
                  .ok());
  absl::StatusOr<RunFunctionResponse> response = functions.Run(Call("fails", ""));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->code(), static_cast<int>(absl::StatusCode::kAborted));
  EXPECT_EQ(response->message(), "a ps failed: ps task 0");
}

TEST(WorkerFunctionsTest, HostileCallsChangeNothing) {
  WorkerFunctions functions;
  int calls = 0;
  ASSERT_TRUE(functions
                  .Register("count",
                            [&calls](const std::string&) -> absl::StatusOr<std::string> {
                              ++calls;
                              return std::string();
                            })
                  .ok());
  // An unknown function.
  absl::StatusOr<RunFunctionResponse> unknown = functions.Run(Call("pstrain.nothing", ""));
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_EQ(unknown->code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  // Oversized arguments: refused as a call, before any function runs.
  absl::StatusOr<RunFunctionResponse> big =
      functions.Run(Call("count", std::string(WorkerFunctions::kMaxArgumentsBytes + 1, 'a')));
  EXPECT_TRUE(absl::IsInvalidArgument(big.status())) << big.status();
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(functions.Status().functions_run(), 0);
  // A name registered twice, or none.
  EXPECT_TRUE(absl::IsInvalidArgument(
      functions.Register("count", [](const std::string&) { return std::string(); })));
  EXPECT_TRUE(absl::IsInvalidArgument(
      functions.Register("", [](const std::string&) { return std::string(); })));
  EXPECT_EQ(functions.Status().functions_size(), 1);
}

}  // namespace
}  // namespace pstrain
