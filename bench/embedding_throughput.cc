// embedding_throughput: a large Embedding table on a parameter server, trained by rows
// (what a worker does: ps_server/client/sparse_embedding.h) next to a dense push of the same table
// (the baseline, measured in the same run).
//
// A real ps (VariableStore + PsServiceImpl behind StartServer, its byte counters as the
// daemon keeps them) on loopback holds a [rows, width] table split into --shards row
// shards, and the 64 -> classes Dense layer after it. The model is the example job's:
// ids -> Embedding -> GlobalAveragePooling1D -> Dense (softmax), SGD.
//   sparse: a worker's whole training step through the real PsTrainer over gRPC, on
//           batches of Zipf ids (common/data/zipf_ids.h): pull the batch's distinct rows,
//           forward and backward on the compact table, push the rows' gradients.
//   dense:  the transfer a dense step needs, without its compute: one PushPull of a
//           gradient for the whole table (zeros: the values do not matter to the wire),
//           shard by shard, the whole table coming back. A dense step costs at least this.
// Bytes per step are the ps's own counters (pstrain_ps_received_bytes_total and
// pstrain_ps_sent_bytes_total, payload bytes: values and row indices) divided by steps.
// Memory: the table once on the ps, and one shard at a time on the wire for the dense
// baseline (10M x 64 floats is 2.5 GB). Nothing here asserts a time: it prints a table.

#include <malloc.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/daemon/command_line.h"
#include "common/data/zipf_ids.h"
#include "common/malloc_tuning.h"
#include "common/math/cpu_backend.h"
#include "common/metrics/metrics_registry.h"
#include "common/rpc/grpc_util.h"
#include "common/sharding/shard_layout.h"
#include "common/status_macros.h"
#include "ps_server/ps_metrics.h"
#include "ps_server/rpc/grpc_ps_client.h"
#include "ps_server/rpc/ps_service.h"
#include "ps_server/variable_store.h"
#include "ps_server/client/ps_trainer.h"

ABSL_FLAG(std::string, rows, "1000000,10000000", "Table sizes (rows), comma-separated");
ABSL_FLAG(int64_t, width, 64, "Floats per row (the Embedding's output_dim)");
ABSL_FLAG(int64_t, batch, 256, "Examples per step");
ABSL_FLAG(int64_t, ids_per_example, 8, "Ids per example");
ABSL_FLAG(double, exponent, 1.1, "Zipf exponent of the ids");
ABSL_FLAG(int, shards, 8, "Row shards of the table (on one ps)");
ABSL_FLAG(double, seconds, 3.0, "Measuring time of the sparse steps per table");
ABSL_FLAG(int, dense_steps, 2, "Dense push-and-pulls of the whole table per table size");

namespace pstrain {
namespace {

constexpr int64_t kClasses = 10;

struct Row {
  std::string mode;
  double received_per_step = 0;
  double sent_per_step = 0;
  double steps_per_second = 0;
  double rows_per_step = 0;
};

double Counter(const MetricsRegistry& registry, const std::string& name) {
  const std::string text = registry.TextFormat();
  const std::string key = "\n" + name + " ";
  const size_t at = text.find(key);
  return at == std::string::npos ? 0 : std::stod(text.substr(at + key.size()));
}

std::string ModelJson(int64_t rows, int64_t width, int64_t ids) {
  return absl::StrCat(
      R"({"class_name": "Sequential", "config": {"name": "zipf_embedding", "layers": [
      {"class_name": "InputLayer", "config": {"batch_input_shape": [null, )",
      ids, R"(]}},
      {"class_name": "Embedding", "config": {"name": "embedding", "input_dim": )", rows,
      R"(, "output_dim": )", width, R"(}},
      {"class_name": "GlobalAveragePooling1D", "config": {"name": "pool"}},
      {"class_name": "Dense", "config": {"name": "classes", "units": )",
      kClasses, R"(, "activation": "softmax"}}]}})");
}

// The table's shards and the Dense layer's variables, all on ps 0, with small values from
// a cheap generator (the full table is never made in one piece).
std::vector<NamedTensor> MakeVariables(const std::vector<VariablePlacementEntry>& shards,
                                       int64_t width) {
  std::vector<NamedTensor> variables;
  uint32_t state = 1;
  auto fill = [&state](Tensor* t) {
    for (float& v : t->values()) {
      state = state * 1664525u + 1013904223u;
      v = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 0.1f;
    }
  };
  for (const VariablePlacementEntry& shard : shards) {
    Tensor t({shard.num_rows(), width});
    fill(&t);
    variables.push_back({shard.name(), std::move(t)});
  }
  Tensor kernel({width, kClasses});
  fill(&kernel);
  variables.push_back({"classes/kernel", std::move(kernel)});
  variables.push_back({"classes/bias", Tensor({kClasses})});
  return variables;
}

absl::StatusOr<std::vector<Row>> MeasureTable(int64_t rows) {
  const int64_t width = absl::GetFlag(FLAGS_width);
  const int64_t ids = absl::GetFlag(FLAGS_ids_per_example);
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  VariableStore store;
  MetricsRegistry registry;
  PsMetrics metrics(&registry, &store);
  PsServiceImpl service(&store, [](const std::string&) {});
  service.set_metrics(&metrics);
  PS_ASSIGN_OR_RETURN(RunningServer server, StartServer({"127.0.0.1:0", {&service}}));
  std::unique_ptr<PsClient> client =
      CreateGrpcPsClient(0, absl::StrCat("127.0.0.1:", server.port), absl::Minutes(5));

  std::vector<VariablePlacementEntry> placement =
      SplitIntoShards({"embedding/embeddings", {rows, width}}, absl::GetFlag(FLAGS_shards));
  const std::vector<VariablePlacementEntry> table_shards = placement;
  for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"classes/kernel", {width, kClasses}}, {"classes/bias", {kClasses}}}) {
    std::vector<VariablePlacementEntry> whole = SplitIntoShards({name, shape}, 1);
    placement.insert(placement.end(), whole.begin(), whole.end());
  }
  OptimizerConfig sgd;
  sgd.set_name("sgd");
  sgd.set_learning_rate(0.1f);
  PS_RETURN_IF_ERROR(store.CreateVariables(MakeVariables(table_shards, width), sgd));

  std::unique_ptr<Backend> backend = CreateCpuBackend();
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                      Model::FromKerasJsonText(ModelJson(rows, width, ids), backend.get()));
  PS_RETURN_IF_ERROR(model->SetLoss(LossConfig{}));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<PsTrainer> trainer,
                      PsTrainer::Create(model.get(), {client.get()}, placement, 1,
                                        EmbeddingTraffic::kRowSparse));
  ZipfIdsOptions zipf;
  zipf.samples = batch * 64;
  zipf.ids_per_example = ids;
  zipf.vocabulary = rows;
  zipf.classes = kClasses;
  zipf.exponent = absl::GetFlag(FLAGS_exponent);
  zipf.seed = 11;
  PS_ASSIGN_OR_RETURN(Dataset data, MakeZipfIdsDataset(zipf));

  std::vector<Row> out;
  // Sparse: whole training steps, after one warm-up step (the Dense layer's first pull).
  {
    auto batch_at = [&](int64_t k) {
      const int64_t first = (k % 64) * batch;
      return std::make_pair(*data.Slice(first, batch), first);
    };
    PS_RETURN_IF_ERROR(trainer->Step(batch_at(0).first.x, batch_at(0).first.y).status());
    const double received = Counter(registry, "pstrain_ps_received_bytes_total");
    const double sent = Counter(registry, "pstrain_ps_sent_bytes_total");
    double touched = 0;
    int64_t steps = 0;
    const absl::Time start = absl::Now();
    const absl::Duration budget = absl::Seconds(absl::GetFlag(FLAGS_seconds));
    while (absl::Now() - start < budget) {
      Dataset b = batch_at(steps + 1).first;
      PS_RETURN_IF_ERROR(trainer->Step(b.x, b.y).status());
      touched += RenumberBatch(b.x, rows)->ids.size();
      ++steps;
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    out.push_back({"sparse (rows of the batch)",
                   (Counter(registry, "pstrain_ps_received_bytes_total") - received) / steps,
                   (Counter(registry, "pstrain_ps_sent_bytes_total") - sent) / steps,
                   steps / seconds, touched / steps});
  }
  // Dense baseline: the whole table up and back, one shard per PushPull (one shard's
  // gradient in memory at a time).
  {
    const double received = Counter(registry, "pstrain_ps_received_bytes_total");
    const double sent = Counter(registry, "pstrain_ps_sent_bytes_total");
    const int steps = absl::GetFlag(FLAGS_dense_steps);
    const absl::Time start = absl::Now();
    for (int step = 0; step < steps; ++step) {
      for (const VariablePlacementEntry& shard : table_shards) {
        PS_RETURN_IF_ERROR(
            client->PushPull({{shard.name(), Tensor({shard.num_rows(), width})}}, step).status());
      }
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    out.push_back({"dense (whole table, no compute)",
                   (Counter(registry, "pstrain_ps_received_bytes_total") - received) / steps,
                   (Counter(registry, "pstrain_ps_sent_bytes_total") - sent) / steps,
                   steps / seconds, static_cast<double>(rows)});
  }
  server.server->Shutdown();
  return out;
}

int Main() {
  std::printf("embedding_throughput: a [rows, %lld] table, batch %lld x %lld Zipf(%.2f) ids, %d "
              "shards on one ps over gRPC loopback, SGD\n",
              static_cast<long long>(absl::GetFlag(FLAGS_width)),
              static_cast<long long>(absl::GetFlag(FLAGS_batch)),
              static_cast<long long>(absl::GetFlag(FLAGS_ids_per_example)),
              absl::GetFlag(FLAGS_exponent), absl::GetFlag(FLAGS_shards));
  std::printf("%10s  %-32s %16s %16s %12s %12s\n", "rows", "mode", "to ps B/step",
              "from ps B/step", "rows/step", "steps/s");
  for (absl::string_view text : absl::StrSplit(absl::GetFlag(FLAGS_rows), ',')) {
    int64_t rows = 0;
    if (!absl::SimpleAtoi(text, &rows) || rows < 2 || rows > kMaxZipfVocabulary) {
      std::fprintf(stderr, "embedding_throughput: --rows: \"%s\" is not a count in [2, %lld]\n",
                   std::string(text).c_str(), static_cast<long long>(kMaxZipfVocabulary));
      return 2;
    }
    absl::StatusOr<std::vector<Row>> table = MeasureTable(rows);
    if (!table.ok()) {
      std::fprintf(stderr, "embedding_throughput: %lld rows: %s\n", static_cast<long long>(rows),
                   std::string(table.status().message()).c_str());
      return 1;
    }
    for (const Row& r : *table) {
      std::printf("%10lld  %-32s %16.0f %16.0f %12.0f %12.2f\n", static_cast<long long>(rows),
                  r.mode.c_str(), r.received_per_step, r.sent_per_step, r.rows_per_step,
                  r.steps_per_second);
    }
    const double ratio = (*table)[1].received_per_step / (*table)[0].received_per_step;
    std::printf("%10s  dense moves %.0fx the bytes of a sparse step; sparse runs %.0fx the "
                "steps per second\n",
                "", ratio, (*table)[0].steps_per_second / (*table)[1].steps_per_second);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  pstrain::ParseCommandLineWithUsage(
      argc, argv,
      "embedding_throughput: a large Embedding table trained by rows on a ps, next to a dense "
      "push of the same table.\n  bazel run -c opt //bench:embedding_throughput -- [flags]");
  pstrain::KeepLargeBlocksInHeap();
  mallopt(M_ARENA_MAX, 1);
  return pstrain::Main();
}
