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

namespace pstrain {
namespace {

// The ps's own count of the payload bytes a row-sparse step moves (values, and 8 bytes
// per row index), through the real gRPC service: the same for a 1,000-row table and a
// 100,000-row one, as the rows touched are the same; a dense push of the table grows with it.
struct StepBytes {
  double received = 0;
  double sent = 0;
};

double Counter(const std::string& text, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const size_t at = text.find(key);
  EXPECT_NE(at, std::string::npos) << name;
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + key.size()));
}

StepBytes RowStepBytes(int64_t table_rows, bool dense) {
  VariableStore store;
  MetricsRegistry registry;
  PsMetrics metrics(&registry, &store);
  PsServiceImpl service(&store, [](const std::string&) {});
  service.set_metrics(&metrics);
  absl::StatusOr<RunningServer> server = StartServer({"127.0.0.1:0", {&service}});
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return {};
  std::unique_ptr<PsClient> client = CreateGrpcPsClient(
      0, absl::StrCat("127.0.0.1:", server->port), absl::Seconds(30));
  OptimizerConfig sgd;
  sgd.set_name("sgd");
  EXPECT_TRUE(client->CreateVariables({{"emb", Tensor({table_rows, 16})}}, sgd).ok());
  const double received_before =
      Counter(registry.TextFormat(), "pstrain_ps_received_bytes_total");
  const double sent_before = Counter(registry.TextFormat(), "pstrain_ps_sent_bytes_total");
  // A batch touching 32 rows (one repeated), spread over the table.
  std::vector<int64_t> rows;
  for (int i = 0; i < 32; ++i) rows.push_back((i * 7919) % table_rows);
  rows.back() = rows.front();
  Tensor values({32, 16});
  for (float& v : values.values()) v = 0.5f;
  if (dense) {
    Tensor full({table_rows, 16});
    for (size_t i = 0; i < rows.size(); ++i) {
      for (int c = 0; c < 16; ++c) full.data()[rows[i] * 16 + c] += 0.5f;
    }
    EXPECT_TRUE(client->PushPull({{"emb", full}}, 1).ok());
  } else {
    std::vector<int64_t> versions;
    std::vector<int64_t> distinct(rows.begin(), rows.end() - 1);  // each row once
    auto pulled = client->PullRows({{"emb", distinct}}, &versions);
    EXPECT_TRUE(pulled.ok()) << pulled.status();
    EXPECT_TRUE(client->PushRows({{"emb", rows, values}}, PushContext()).ok());
    // The pushed rows moved (SGD, lr 0.01; the repeated row twice), the others did not.
    auto after = client->PullRows({{"emb", {rows[0], rows[1], (rows[1] + 1) % table_rows}}},
                                  nullptr);
    EXPECT_TRUE(after.ok()) << after.status();
    if (after.ok()) {
      EXPECT_FLOAT_EQ((*after)[0].data()[0], -0.01f);
      EXPECT_FLOAT_EQ((*after)[0].data()[16], -0.005f);
      EXPECT_EQ((*after)[0].data()[32], 0.0f);
    }
  }
  const std::string text = registry.TextFormat();
  server->server->Shutdown();
  return {Counter(text, "pstrain_ps_received_bytes_total") - received_before,
          Counter(text, "pstrain_ps_sent_bytes_total") - sent_before};
}

TEST(PsMetricsTest, RowStepBytesGrowWithRowsTouchedNotTableSize) {
  const StepBytes small = RowStepBytes(1000, false);
  const StepBytes large = RowStepBytes(100000, false);
  // Pushed: 32 rows of 16 floats and 32 indices; pulled: the 31 distinct ones, then 3.
  EXPECT_EQ(small.received, 32 * 16 * 4 + 32 * 8);
  EXPECT_EQ(large.received, small.received);
  EXPECT_EQ(small.sent, (31 + 3) * 16 * 4);
  EXPECT_EQ(large.sent, small.sent);
  // The dense push-pull of the same step moves the whole table both ways.
  const StepBytes dense = RowStepBytes(100000, true);
  EXPECT_EQ(dense.received, 100000.0 * 16 * 4);
  EXPECT_EQ(dense.sent, 100000.0 * 16 * 4);
}

}  // namespace
}  // namespace pstrain
