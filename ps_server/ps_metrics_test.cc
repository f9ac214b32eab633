// The ps' metrics as a scrape sees them, after real calls through the gRPC service.

#include "ps_server/ps_metrics.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "ps_server/rpc/ps_service.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

TEST(PsMetricsTest, CountsPushesPullsBytesLatencyRefusalsAndVersions) {
  VariableStore store;
  MetricsRegistry registry;
  PsMetrics metrics(&registry, &store);
  PsServiceImpl service(&store, [](const std::string&) {});
  service.set_metrics(&metrics);
  absl::StatusOr<RunningServer> server = StartServer({"127.0.0.1:0", {&service}});
  ASSERT_TRUE(server.ok()) << server.status();
  // Small pushes go unary, and a threshold of 0 sends every push over the stream.
  std::unique_ptr<PsClient> unary = CreateGrpcPsClient(
      0, absl::StrCat("127.0.0.1:", server->port), absl::Seconds(10));
  GrpcPsClientOptions streamed_options;
  streamed_options.stream_threshold_bytes = 0;
  std::unique_ptr<PsClient> streamed = CreateGrpcPsClient(
      0, absl::StrCat("127.0.0.1:", server->port), absl::Seconds(10), streamed_options);

  OptimizerConfig sgd;
  sgd.set_name("sgd");
  sgd.set_learning_rate(0.1f);
  ASSERT_TRUE(unary->CreateVariables({{"w", Tensor({4, 3})}, {"b", Tensor({3})}}, sgd).ok());
  const std::vector<NamedTensor> gradients = {{"w", Tensor({4, 3})}, {"b", Tensor({3})}};
  ASSERT_TRUE(unary->PushPull(gradients, 1).ok());
  ASSERT_TRUE(streamed->PushPull(gradients, 2).ok());
  ASSERT_TRUE(unary->Pull({"w"}).ok());
  // A gradient of the wrong shape, and below a NaN one, are refused and counted as such.
  EXPECT_FALSE(unary->PushPull({{"w", Tensor({2, 2})}}, 3).ok());
  EXPECT_FALSE(unary->Pull({"nope"}).ok());
  // A NaN gradient is refused and counted.
  EXPECT_FALSE(unary->PushPull({{"b", Tensor({3}, {0, NAN, 0})}}, 4).ok());

  const std::string text = registry.TextFormat();
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_pushes_total 2\n"));
  // The store counts the pull half of each push-pull too.
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_pulls_total 3\n"));
  // 15 floats per push in; 15 back per push-pull and 12 for the pull.
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_received_bytes_total 120\n"));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("\npstrain_ps_sent_bytes_total ", 4 * (15 + 15 + 12),
                                           "\n")));
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_push_duration_seconds_count 2\n"));
  EXPECT_THAT(text, HasSubstr("pstrain_ps_refused_calls_total{method=\"PushPull\",reason=\"invalid_"
                              "argument\"} 2"));
  EXPECT_THAT(text,
              HasSubstr("pstrain_ps_refused_calls_total{method=\"Pull\",reason=\"not_found\"} 1"));
  EXPECT_THAT(text, HasSubstr("pstrain_ps_variable_version{variable=\"w\"} 2"));
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_variables 2\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_variable_bytes 60\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_consistency_timeouts_total 0\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_nonfinite_refused_total 1\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_nonfinite_skipped_total 0\n"));
  EXPECT_THAT(text, HasSubstr("\npstrain_ps_duplicate_pushes_total 0\n"));
  server->server->Shutdown();
}

}  // namespace
}  // namespace pstrain
